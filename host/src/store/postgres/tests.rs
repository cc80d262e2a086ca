//! PostgreSQL-only store tests.
