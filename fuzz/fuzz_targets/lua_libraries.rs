//! The Lua libraries Redis bundles (cjson, cmsgpack, struct, bit) over input-made arguments.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| tessera::fuzz_targets::lua_libraries(input));
