"""Scheduling: the schedule of each group kind, chosen for a target."""
