"""mignurse: on-call companion for GPU nodes on Amazon EKS."""

__version__ = "0.1.0"
