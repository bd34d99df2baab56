//! Redis's intset (placeholder).
