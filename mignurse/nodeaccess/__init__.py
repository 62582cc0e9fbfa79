"""Reaching a node: run a script there with a deadline and bring its output back."""
