"""Teaching: quizzes and their grading, the code sandbox, mastery, paths and review (pure)."""
