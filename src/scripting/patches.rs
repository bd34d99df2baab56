//! Redis's fixes to its bundled Lua 5.1, carried into the interpreter Tessera links (the
//! unpatched Lua 5.1.5 that mlua vendors) as replacements at the API boundary, so that no
//! script reaches the flawed code:
//!
//! - `unpack` with a huge range (CVE-2025-46817): Lua 5.1's `e - i + 1` overflows and the
//!   stack check is skipped, a segfault. Replaced by [`unpack`], Redis's fixed arithmetic.
//! - Binary chunks (CVE-2015-4335): crafted bytecode escapes the sandbox. Redis's parser
//!   reads every chunk as text; `prelude.lua`'s `load_text` does the same for `loadstring`,
//!   `load`, EVAL's body and FUNCTION LOAD's.
//! - Metatables of basic types (CVE-2025-46818): `getmetatable('')` handed out the string
//!   metatable, and through its `__index` the real `string` table, to be changed for every
//!   later script. `prelude.lua` gives strings a read-only metatable whose `__index` is the
//!   read-only `string` (Redis 7's read-only tables, CVE-2022-24735).
//! - The parser's chunk name freed by a collection during parsing (CVE-2025-49844): every
//!   chunk is loaded through `loadstring` with its name on the Lua stack, so the name is
//!   always anchored.
//! - Long brackets whose level overflows the lexer's int (CVE-2025-46819): the string is
//!   cut out 4 GB long, past the lexer's buffer. It takes a chunk of 2 GB; the heap bound
//!   (`LUA_MEMORY_BYTES_MAX`, 1 GB) keeps any such chunk out of the interpreter.
//!
//! The libraries Redis ships in C (cjson, cmsgpack, struct, bit) are Tessera's own Rust
//! (`libs/`), where their advisories' overflows are checked arithmetic; `docs/security.md`
//! lists every advisory and its test.

use mlua::ffi;
use std::ffi::c_int;

/// Lua 5.1's `unpack(list [, i [, j]])` with Redis's fix: the count is computed in
/// unsigned arithmetic, so no range overflows past the stack check.
///
/// # Safety
/// Called by Lua as a C function on a valid state. It raises errors (a `longjmp` through
/// this frame, which holds nothing to drop) only through the Lua C API.
pub unsafe extern "C-unwind" fn unpack(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: index 1 is checked to be a table before it is read; `lua_checkstack` makes
    // room for every value pushed; the arguments' conversions are Lua's own (`luaL_optint`
    // truncates to a C int as Lua 5.1's does).
    unsafe {
        ffi::luaL_checktype(state, 1, ffi::LUA_TTABLE);
        let first = ffi::luaL_optinteger(state, 2, 1) as c_int;
        let last = if ffi::lua_isnoneornil(state, 3) != 0 {
            ffi::lua_objlen(state, 1) as c_int
        } else {
            ffi::luaL_checkinteger(state, 3) as c_int
        };
        if first > last {
            return 0;
        }
        let span = (last as u32).wrapping_sub(first as u32);
        if span >= c_int::MAX as u32 || ffi::lua_checkstack(state, span as c_int + 1) == 0 {
            return ffi::luaL_error(state, c"too many results to unpack".as_ptr());
        }
        let count = span as c_int + 1;
        for offset in 0..count {
            ffi::lua_rawgeti_(state, 1, first.wrapping_add(offset));
        }
        count
    }
}
