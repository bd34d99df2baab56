//! LOLWUT [VERSION v] [params]: computer art and the server's version, as Redis has it
//! since 5.0. The arguments are parsed as Redis 7.0 parses them (VERSION 5 takes a
//! width, tiles per row and tiles per column; VERSION 6 a width and a height; other
//! versions and no VERSION take none), with its errors and clamps; the art is Tessera's
//! own — a mosaic, Tessera being a mosaic's tile — and the last line names Tessera's
//! version instead of Redis's.

use super::{Action, Args, CommandSpec, Ctx, eq_ignore_case, flags, int_arg};
use crate::command;
use rand::RngExt;

pub fn commands() -> Vec<CommandSpec> {
    use flags::*;
    vec![command!(
        "lolwut",
        -1,
        READONLY | FAST,
        (0, 0, 0),
        "server",
        "Display some computer art and the Redis version",
        lolwut
    )]
}

/// The version line every piece ends with.
fn signature() -> String {
    format!("Tessera ver. {}\n", env!("CARGO_PKG_VERSION"))
}

/// A piece of art and its parameters, parsed.
enum Piece {
    /// Tiles in shades of grey that loosen row by row (Redis's VERSION 5 is Georg Nees's
    /// Schotter, squares that do the same).
    Loosening {
        width: usize,
        tiles_per_row: usize,
        tiles_per_column: usize,
    },
    /// A mosaic in four terminal greys (Redis's VERSION 6 is an 8-bit landscape in them).
    Greys { width: usize, height: usize },
    /// What this version draws by default: a small loosening mosaic.
    Own,
}

/// The most lines of art a piece may have: bounds the reply (at most about 1.5 MB, as
/// Redis's largest VERSION 5 drawing).
const LINES_MAX: usize = 500;

fn lolwut(ctx: &mut Ctx, args: &Args) -> Action {
    // Redis reads the version as a C `long` printed as `unsigned int`: only its low 32
    // bits choose the piece.
    let (version, params) = if args.len() >= 3 && eq_ignore_case(args[1], "version") {
        let Some(version) = int_arg(ctx, args[2]) else {
            return Action::None;
        };
        (Some(version as u32), &args[3..])
    } else {
        (None, &args[1..])
    };
    let piece = match version {
        Some(5) => {
            let Some(numbers) =
                parameters(ctx, params, &[(66, 1, 1000), (8, 1, 200), (12, 1, 200)])
            else {
                return Action::None;
            };
            Piece::Loosening {
                width: numbers[0],
                tiles_per_row: numbers[1],
                tiles_per_column: numbers[2],
            }
        }
        Some(6) => {
            let Some(numbers) = parameters(ctx, params, &[(80, 1, 1000), (20, 1, 1000)]) else {
                return Action::None;
            };
            Piece::Greys {
                width: numbers[0],
                height: numbers[1],
            }
        }
        _ => Piece::Own,
    };
    let art = match piece {
        Piece::Loosening {
            width,
            tiles_per_row,
            tiles_per_column,
        } => format!(
            "{}\nTiles that loosen row by row, after Georg Nees's Schotter. {}",
            loosening(width, tiles_per_row, tiles_per_column),
            signature()
        ),
        Piece::Greys { width, height } => format!(
            "{}\nA mosaic in four greys, laid by a random hand. {}",
            greys(width, height),
            signature()
        ),
        Piece::Own => format!("{}\n{}", loosening(24, 6, 4), signature()),
    };
    ctx.out.verbatim(art.as_bytes());
    Action::None
}

/// The integer parameters given (each `(default, min, max)` where absent), clamped as
/// Redis clamps them; None after the error for one that is not an integer.
fn parameters(ctx: &mut Ctx, given: &Args, limits: &[(i64, i64, i64)]) -> Option<Vec<usize>> {
    let mut numbers = Vec::with_capacity(limits.len());
    for (index, &(default, min, max)) in limits.iter().enumerate() {
        let value = match given.get(index) {
            Some(arg) => int_arg(ctx, arg)?,
            None => default,
        };
        numbers.push(value.clamp(min, max) as usize);
    }
    Some(numbers)
}

/// A grid of tiles, `tiles_per_row` across `width` characters and `tiles_per_column`
/// down, with grout between them; the further down a row, the likelier its tiles are to
/// change shade, slip sideways or be missing.
fn loosening(width: usize, tiles_per_row: usize, tiles_per_column: usize) -> String {
    const SHADES: [char; 4] = ['█', '▓', '▒', '░'];
    let mut rng = rand::rng();
    let tile_width = (width / tiles_per_row).max(1);
    // A character is about twice as tall as it is wide: square-looking tiles.
    let tile_height = (tile_width / 2).clamp(1, (LINES_MAX / tiles_per_column).max(1));
    let columns = tile_width * tiles_per_row;
    let lines = (tile_height * tiles_per_column).min(LINES_MAX);
    let mut canvas = vec![vec![' '; columns]; lines];
    // Grout only where a tile is big enough to keep some face.
    let face_width = if tile_width >= 3 {
        tile_width - 1
    } else {
        tile_width
    };
    let face_height = if tile_height >= 2 {
        tile_height - 1
    } else {
        tile_height
    };
    for row in 0..tiles_per_column {
        let disorder = row as f64 / (tiles_per_column.max(2) - 1) as f64;
        for column in 0..tiles_per_row {
            if rng.random_bool(disorder * disorder / 3.0) {
                continue; // fallen out
            }
            let shade = if rng.random_bool(disorder) {
                SHADES[rng.random_range(0..SHADES.len())]
            } else {
                SHADES[(row + column) % 2]
            };
            let slip: isize = if rng.random_bool(disorder / 2.0) {
                if rng.random_bool(0.5) { 1 } else { -1 }
            } else {
                0
            };
            for line in canvas.iter_mut().skip(row * tile_height).take(face_height) {
                for x in column * tile_width..column * tile_width + face_width {
                    if let Some(cell) = x.checked_add_signed(slip).and_then(|x| line.get_mut(x)) {
                        *cell = shade;
                    }
                }
            }
        }
    }
    let mut art = String::new();
    for line in canvas {
        let text: String = line.into_iter().collect();
        art.push_str(text.trim_end());
        art.push('\n');
    }
    // The last row's grout, and rows whose tiles all fell out, end nothing.
    let kept = art.trim_end_matches('\n').len();
    art.truncate(kept);
    art.push('\n');
    art
}

/// `width` by `height` cells in four terminal greys (background and foreground alike),
/// in tiles two cells wide, lighter towards the top as a sky over a darker ground.
fn greys(width: usize, height: usize) -> String {
    // White, light grey, dark grey, black: SGR foreground and background pairs.
    const GREYS: [&str; 4] = ["97;107", "37;47", "90;100", "30;40"];
    let mut rng = rand::rng();
    let mut art = String::new();
    for y in 0..height {
        let depth = (y as f64 + 0.5) / height as f64;
        let mut x = 0;
        while x < width {
            let jitter: f64 = rng.random_range(-0.35..0.35);
            let level = ((depth + jitter) * GREYS.len() as f64).clamp(0.0, 3.0) as usize;
            let cells = 2.min(width - x);
            art.push_str("\x1b[0;");
            art.push_str(GREYS[level]);
            art.push('m');
            art.push_str(&" ".repeat(cells));
            x += cells;
        }
        art.push_str("\x1b[0m\n");
    }
    art
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loosening_mosaic_keeps_to_its_width_and_line_bound() {
        for (width, across, down) in [(66, 8, 12), (1, 1, 1), (1000, 1, 200), (10, 200, 3)] {
            let art = loosening(width, across, down);
            let lines: Vec<&str> = art.lines().collect();
            assert!(!lines.is_empty() && lines.len() <= LINES_MAX);
            let widest = lines.iter().map(|l| l.chars().count()).max().unwrap();
            assert!(
                widest <= width.max(across),
                "{width} {across} {down}: {widest}"
            );
        }
    }

    #[test]
    fn a_grey_mosaic_has_its_height_in_lines() {
        let art = greys(7, 3);
        assert_eq!(art.lines().count(), 3);
        assert!(art.lines().all(|l| l.matches(' ').count() == 7));
    }
}
