import './base.css';
import './data.css';
