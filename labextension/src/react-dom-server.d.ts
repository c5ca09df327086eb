// react-dom ships with JupyterLab without its types; the tests render cards to static markup.
declare module 'react-dom/server' {
  import { ReactElement } from 'react';
  export function renderToStaticMarkup(element: ReactElement): string;
}
