"""PostgreSQL as Django has it, with a pool that tells a busy server from
one out of reach (base.py)."""
