"""Checks that a proposal must pass before anything is written."""
