// The Refresh button and error line every tab of the panel starts with.
import * as React from 'react';

import { __ } from './i18n';

/** A tab's Refresh button and, under it, what went wrong in words. */
export function RefreshBar(props: { onRefresh: () => void; error: string }): React.ReactElement {
  return (
    <>
      <div className="jp-DeepTutorPanel-toolbar">
        <button className="jp-Button jp-mod-styled" onClick={props.onRefresh}>
          {__('Refresh')}
        </button>
      </div>
      {props.error ? <div className="jp-DeepTutorChat-error">{props.error}</div> : null}
    </>
  );
}
