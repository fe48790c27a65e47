"""Recorded traffic as an eval set: its mix beside the eval sets, a label-free estimate of its quality, and the calls to
judge next."""
