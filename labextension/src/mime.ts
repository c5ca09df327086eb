/**
 * The MIME extension (package.json `jupyterlab.mimeExtension`): a saved turn renders in any
 * notebook, even one opened without a kernel. Rank 50 puts it before Markdown (60), so the
 * compact card replaces the plain-Markdown fallback, and after the live widget view. A finished
 * turn also carries text/html (kernel/display.py `static_bundle`, the full answer): HTML has the
 * same rank and was registered first, so JupyterLab shows that, and the card only where a turn
 * saved no HTML (notebooks written before it).
 */
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';

import { TRACE_MIME } from './protocol';
import { rendererFactory } from './trace';

const extension: IRenderMime.IExtension = {
  id: 'deeptutor-jupyter:trace',
  rendererFactory,
  rank: 50,
  dataType: 'json'
};

export { TRACE_MIME };
export default extension;
