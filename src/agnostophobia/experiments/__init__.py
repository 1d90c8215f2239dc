"""Experiments: training runs, the paper reproductions and their reports."""
