"""Diagnosis: pure rules over a snapshot, history, node evidence and `now`, giving findings."""
