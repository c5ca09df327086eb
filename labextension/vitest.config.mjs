// The form rules are pure functions: they run in node, no browser and no JupyterLab.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: { include: ['src/**/*.test.ts'], environment: 'node' }
});
