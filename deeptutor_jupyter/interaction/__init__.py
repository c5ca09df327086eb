"""ask_user: the form a turn pauses on, consumed exactly once, resumable after a restart."""
