"""The master's web view and metrics: an HTTP server in a child process of the master (master/viewer.py)."""
