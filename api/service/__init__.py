"""The service behind the HTTP routes: the store, decisions, approvals, tokens and metrics."""
