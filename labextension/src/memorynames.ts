/**
 * A memory document in a learner's words ("About you", "Notes from quizzes"), never its
 * layer and file name ("L3/profile.md"); the kernel's workbench uses the same words
 * (deeptutor_jupyter/kernel/widgets/memory_workbench.py `doc_title`).
 */
import { __ } from './i18n';

export function docTitle(layer: string, key: string): string {
  if (layer === 'L3') {
    switch (key) {
      case 'recent':
        return __('Recent work');
      case 'profile':
        return __('About you');
      case 'scope':
        return __('What you are studying');
      case 'preferences':
        return __('Your preferences');
    }
  } else if (layer === 'L2') {
    switch (key) {
      case 'chat':
        return __('Notes from chats');
      case 'notebook':
        return __('Notes from notebooks');
      case 'quiz':
        return __('Notes from quizzes');
      case 'kb':
        return __('Notes from the knowledge base');
    }
  }
  return __('Notes: %1', key);
}
