"""End-to-end pipelines behind the jobs: each reads a typed config, runs, writes a manifest and a summary."""
