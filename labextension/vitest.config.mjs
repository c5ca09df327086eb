// The panel's logic runs in node, no browser and no JupyterLab: pure functions, and KernelChat
// against a fake session, kernel and comm (src/chat.test.ts).
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: { include: ['src/**/*.test.ts'], environment: 'node' }
});
