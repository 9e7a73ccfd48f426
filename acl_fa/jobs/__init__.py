"""The work behind the CLI's commands (run, bench, plan sweeps, profile, doctor, parallel runs):
plain functions returning reports. No click here; acl_fa.cli parses and prints."""
