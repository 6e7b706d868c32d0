"""SQLQuery-v0: its generated databases and questions, Spider / BIRD readers, and the comparison of rows."""
