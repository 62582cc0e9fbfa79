"""The app's screens, one per module: runbooks (picker, params, plan, confirmation, run),
the audit log and one run's story, help, and the pagers (journals, describe, findings)."""
