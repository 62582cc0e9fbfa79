"""Support-bundle collection: node sources, redaction and packaging."""
