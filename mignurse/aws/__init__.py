"""Adapters to AWS APIs (boto3) that more than one face needs."""
