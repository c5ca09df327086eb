import './base.css';
import './data.css';
import './progress.css';
import './edits.css';
