//! Redis's listpack (placeholder).
