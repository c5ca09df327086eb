import './base.css';
import './data.css';
import './edits.css';
