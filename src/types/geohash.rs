//! Geohashes with Redis 7.0's arithmetic: the 52-bit interleaved score of a geo set's
//! member, its decoding back to a position, the Haversine distance, and the search area
//! of a radius or box query (a centre cell and its eight neighbours at a step estimated
//! from the radius, with the cells the bounding box proves useless dropped).
//!
//! Every formula keeps Redis's order of floating-point operations and its constants,
//! because replies print positions with 17 decimals and distances with 4: a different
//! but equally good rounding would show in the last digits. The trigonometry is the C
//! library's (Rust's `f64::sin` and kin call it), as Redis's is.

/// Bits per coordinate at full precision: 26 + 26 = 52 bits, exact in a double score.
pub const STEP_MAX: u8 = 26;
pub const LAT_MIN: f64 = -85.05112878;
pub const LAT_MAX: f64 = 85.05112878;
pub const LONG_MIN: f64 = -180.0;
pub const LONG_MAX: f64 = 180.0;
/// Earth's quadratic mean radius for WGS-84, Redis's constant.
pub const EARTH_RADIUS_METERS: f64 = 6372797.560856;
const MERCATOR_MAX: f64 = 20037726.37;
const DEGREES_TO_RADIANS: f64 = std::f64::consts::PI / 180.0;

/// A cell: `step` bits per coordinate, latitude bits at even positions, longitude at odd.
/// The all-zero value marks a neighbour dropped from a search.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Cell {
    pub bits: u64,
    pub step: u8,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Range {
    pub min: f64,
    pub max: f64,
}

/// The geo sets' coordinate ranges (Web Mercator's latitude limits).
pub const LONG_RANGE: Range = Range {
    min: LONG_MIN,
    max: LONG_MAX,
};
pub const LAT_RANGE: Range = Range {
    min: LAT_MIN,
    max: LAT_MAX,
};
/// The standard geohash latitude range, for GEOHASH's text.
pub const STANDARD_LAT_RANGE: Range = Range {
    min: -90.0,
    max: 90.0,
};

#[derive(Clone, Copy, Debug)]
pub struct Area {
    pub longitude: Range,
    pub latitude: Range,
}

fn degrees_to_radians(angle: f64) -> f64 {
    angle * DEGREES_TO_RADIANS
}

fn radians_to_degrees(angle: f64) -> f64 {
    angle / DEGREES_TO_RADIANS
}

/// Spreads the 32 bits of `value` over the even bit positions of a u64.
fn spread(value: u32) -> u64 {
    let mut x = value as u64;
    x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    (x | (x << 1)) & 0x5555_5555_5555_5555
}

/// Gathers the even bit positions of `value` into 32 bits (the inverse of `spread`).
fn gather(value: u64) -> u32 {
    let mut x = value & 0x5555_5555_5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x >> 4)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x >> 8)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x >> 16)) & 0x0000_0000_FFFF_FFFF;
    x as u32
}

/// The cell of `step` bits holding the position, or None outside the geo sets' limits
/// or the ranges given.
pub fn encode(
    long_range: Range,
    lat_range: Range,
    longitude: f64,
    latitude: f64,
    step: u8,
) -> Option<Cell> {
    if step == 0 || step > 32 {
        return None;
    }
    // The geo sets' limits apply whatever the ranges (as in Redis), and NaN fails them.
    let inside = |v: f64, min: f64, max: f64| v >= min && v <= max;
    if !inside(longitude, LONG_MIN, LONG_MAX) || !inside(latitude, LAT_MIN, LAT_MAX) {
        return None;
    }
    if !inside(latitude, lat_range.min, lat_range.max)
        || !inside(longitude, long_range.min, long_range.max)
    {
        return None;
    }
    let scale = (1u64 << step) as f64;
    let lat_offset = (latitude - lat_range.min) / (lat_range.max - lat_range.min) * scale;
    let long_offset = (longitude - long_range.min) / (long_range.max - long_range.min) * scale;
    // Truncated to 32 bits as C's conversion does; the maximum of a range gives 2^step,
    // one bit above the cell's, and Redis keeps that bit in the score.
    let bits = spread(lat_offset as u32) | (spread(long_offset as u32) << 1);
    Some(Cell { bits, step })
}

/// The score of a position at full precision (the caller checked the limits).
pub fn score_of(longitude: f64, latitude: f64) -> Option<u64> {
    encode(LONG_RANGE, LAT_RANGE, longitude, latitude, STEP_MAX).map(align_52)
}

/// A cell's bits shifted to the 52-bit score scale.
pub fn align_52(cell: Cell) -> u64 {
    cell.bits << (52 - cell.step as u32 * 2)
}

/// The area a cell covers within the ranges given.
pub fn decode(long_range: Range, lat_range: Range, cell: Cell) -> Area {
    let lat_cells = gather(cell.bits);
    let long_cells = gather(cell.bits >> 1);
    let scale = (1u64 << cell.step) as f64;
    let lat_scale = lat_range.max - lat_range.min;
    let long_scale = long_range.max - long_range.min;
    let edge = |cells: u32, min: f64, span: f64| min + (cells as f64 / scale) * span;
    Area {
        latitude: Range {
            min: edge(lat_cells, lat_range.min, lat_scale),
            max: edge(lat_cells.wrapping_add(1), lat_range.min, lat_scale),
        },
        longitude: Range {
            min: edge(long_cells, long_range.min, long_scale),
            max: edge(long_cells.wrapping_add(1), long_range.min, long_scale),
        },
    }
}

/// The bits a score stands for, as C's `(uint64_t)` conversion gives them on x86-64
/// (what Redis reads from any score, a geo one or not).
pub fn score_bits(score: f64) -> u64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    const INDEFINITE: u64 = 1 << 63;
    if score.is_nan() {
        INDEFINITE
    } else if score < TWO_63 {
        if score >= -TWO_63 {
            score as i64 as u64
        } else {
            INDEFINITE
        }
    } else if score - TWO_63 < TWO_63 {
        ((score - TWO_63) as i64 as u64) ^ INDEFINITE
    } else {
        0
    }
}

/// The position (longitude, latitude) a score stands for: its cell's centre, clamped
/// to the limits.
pub fn position_of(score: f64) -> (f64, f64) {
    let cell = Cell {
        bits: score_bits(score),
        step: STEP_MAX,
    };
    let area = decode(LONG_RANGE, LAT_RANGE, cell);
    let longitude = ((area.longitude.min + area.longitude.max) / 2.0).clamp(LONG_MIN, LONG_MAX);
    let latitude = ((area.latitude.min + area.latitude.max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    (longitude, latitude)
}

/// The 11-character standard geohash of a score (GEOHASH): re-encoded over latitudes
/// ±90, the eleventh character always '0' (52 bits make ten and a bit).
pub fn text_of(score: f64) -> [u8; 11] {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let (longitude, latitude) = position_of(score);
    let bits = encode(
        LONG_RANGE,
        STANDARD_LAT_RANGE,
        longitude,
        latitude,
        STEP_MAX,
    )
    .map_or(0, |cell| cell.bits);
    let mut text = [b'0'; 11];
    for (i, slot) in text.iter_mut().enumerate().take(10) {
        let index = (bits >> (52 - (i + 1) * 5)) & 0x1f;
        *slot = ALPHABET[index as usize];
    }
    text
}

/// The distance along a meridian between two latitudes (Redis's shortcut when the
/// longitudes are the same).
pub fn latitude_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS_METERS * (degrees_to_radians(lat2) - degrees_to_radians(lat1)).abs()
}

/// The Haversine great-circle distance in meters.
pub fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let lon1r = degrees_to_radians(lon1);
    let lon2r = degrees_to_radians(lon2);
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return latitude_distance(lat1, lat2);
    }
    let lat1r = degrees_to_radians(lat1);
    let lat2r = degrees_to_radians(lat2);
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_METERS * a.sqrt().asin()
}

/// What a search covers, sizes in the unit of `to_meters`.
#[derive(Clone, Copy, Debug)]
pub enum Shape {
    Radius(f64),
    Box { width: f64, height: f64 },
}

/// A search: its centre, shape and unit.
#[derive(Clone, Copy, Debug)]
pub struct Search {
    pub longitude: f64,
    pub latitude: f64,
    pub shape: Shape,
    pub to_meters: f64,
}

impl Search {
    /// The distance from the centre to a point if the point is inside the shape.
    pub fn distance_if_inside(&self, longitude: f64, latitude: f64) -> Option<f64> {
        match self.shape {
            Shape::Radius(radius) => {
                let d = distance(self.longitude, self.latitude, longitude, latitude);
                // NaN is "inside", as Redis's `>` test makes it.
                (d.partial_cmp(&(radius * self.to_meters)) != Some(std::cmp::Ordering::Greater))
                    .then_some(d)
            }
            Shape::Box { width, height } => {
                let (width, height) = (width * self.to_meters, height * self.to_meters);
                if latitude_distance(latitude, self.latitude) > height / 2.0 {
                    return None;
                }
                if distance(longitude, latitude, self.longitude, latitude) > width / 2.0 {
                    return None;
                }
                Some(distance(self.longitude, self.latitude, longitude, latitude))
            }
        }
    }

    /// The bounding box: (min longitude, min latitude, max longitude, max latitude).
    fn bounds(&self) -> [f64; 4] {
        let (half_width, half_height) = match self.shape {
            Shape::Radius(radius) => (radius, radius),
            Shape::Box { width, height } => (width / 2.0, height / 2.0),
        };
        let height = self.to_meters * half_height;
        let width = self.to_meters * half_width;
        let lat_delta = radians_to_degrees(height / EARTH_RADIUS_METERS);
        let long_delta_top = radians_to_degrees(
            width / EARTH_RADIUS_METERS / degrees_to_radians(self.latitude + lat_delta).cos(),
        );
        let long_delta_bottom = radians_to_degrees(
            width / EARTH_RADIUS_METERS / degrees_to_radians(self.latitude - lat_delta).cos(),
        );
        // The box's wider edge is the one nearer the equator.
        let long_delta = if self.latitude < 0.0 {
            long_delta_bottom
        } else {
            long_delta_top
        };
        [
            self.longitude - long_delta,
            self.latitude - lat_delta,
            self.longitude + long_delta,
            self.latitude + lat_delta,
        ]
    }

    /// The cells to scan, in Redis's order: the centre, then north, south, east, west,
    /// north-east, north-west, south-east, south-west; dropped ones are zero.
    pub fn cells(&self) -> [Cell; 9] {
        let [min_lon, min_lat, max_lon, max_lat] = self.bounds();
        let radius_meters = match self.shape {
            Shape::Radius(radius) => radius,
            Shape::Box { width, height } => {
                ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
            }
        } * self.to_meters;
        let mut step = estimate_step(radius_meters, self.latitude);
        let centre = |step| {
            // A centre is always within the limits (parsed and checked, or decoded).
            encode(LONG_RANGE, LAT_RANGE, self.longitude, self.latitude, step)
                .unwrap_or(Cell { bits: 0, step })
        };
        let mut cell = centre(step);
        let mut around = neighbours(cell);
        let north = decode(LONG_RANGE, LAT_RANGE, around[0]);
        let south = decode(LONG_RANGE, LAT_RANGE, around[1]);
        let east = decode(LONG_RANGE, LAT_RANGE, around[2]);
        let west = decode(LONG_RANGE, LAT_RANGE, around[3]);
        // A step whose neighbours do not reach the bounding box is one too fine.
        let too_fine = north.latitude.max < max_lat
            || south.latitude.min > min_lat
            || east.longitude.max < max_lon
            || west.longitude.min > min_lon;
        if step > 1 && too_fine {
            step -= 1;
            cell = centre(step);
            around = neighbours(cell);
        }
        let area = decode(LONG_RANGE, LAT_RANGE, cell);
        let [n, s, e, w, ne, nw, se, sw] = &mut around;
        if step >= 2 {
            let zero = Cell::default();
            if area.latitude.min < min_lat {
                (*s, *sw, *se) = (zero, zero, zero);
            }
            if area.latitude.max > max_lat {
                (*n, *ne, *nw) = (zero, zero, zero);
            }
            if area.longitude.min < min_lon {
                (*w, *sw, *nw) = (zero, zero, zero);
            }
            if area.longitude.max > max_lon {
                (*e, *se, *ne) = (zero, zero, zero);
            }
        }
        [cell, *n, *s, *e, *w, *ne, *nw, *se, *sw]
    }
}

/// The scores a cell's members have: [min, max).
pub fn score_range(cell: Cell) -> (u64, u64) {
    let next = Cell {
        bits: cell.bits.wrapping_add(1),
        step: cell.step,
    };
    (align_52(cell), align_52(next))
}

/// The step whose cells cover `range_meters` around a point at `latitude`, roughly.
fn estimate_step(mut range_meters: f64, latitude: f64) -> u8 {
    if range_meters == 0.0 {
        return 26;
    }
    let mut step: i32 = 1;
    while range_meters < MERCATOR_MAX {
        range_meters *= 2.0;
        step += 1;
    }
    step -= 2;
    // Cells narrow towards the poles.
    if !(-66.0..=66.0).contains(&latitude) {
        step -= 1;
        if !(-80.0..=80.0).contains(&latitude) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u8
}

fn move_x(cell: &mut Cell, direction: i8) {
    let width = 64 - cell.step as u32 * 2;
    let x = cell.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let y = cell.bits & 0x5555_5555_5555_5555;
    let zz = 0x5555_5555_5555_5555u64 >> width;
    let x = if direction > 0 {
        x.wrapping_add(zz + 1)
    } else {
        (x | zz).wrapping_sub(zz + 1)
    };
    cell.bits = (x & (0xaaaa_aaaa_aaaa_aaaa >> width)) | y;
}

fn move_y(cell: &mut Cell, direction: i8) {
    let width = 64 - cell.step as u32 * 2;
    let x = cell.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let y = cell.bits & 0x5555_5555_5555_5555;
    let zz = 0xaaaa_aaaa_aaaa_aaaau64 >> width;
    let y = if direction > 0 {
        y.wrapping_add(zz + 1)
    } else {
        (y | zz).wrapping_sub(zz + 1)
    };
    cell.bits = x | (y & (0x5555_5555_5555_5555 >> width));
}

/// The eight neighbours: north, south, east, west, NE, NW, SE, SW (wrapping around).
fn neighbours(cell: Cell) -> [Cell; 8] {
    let shifted = |dx: i8, dy: i8| {
        let mut c = cell;
        if dx != 0 {
            move_x(&mut c, dx);
        }
        if dy != 0 {
            move_y(&mut c, dy);
        }
        c
    };
    [
        shifted(0, 1),
        shifted(0, -1),
        shifted(1, 0),
        shifted(-1, 0),
        shifted(1, 1),
        shifted(-1, 1),
        shifted(1, -1),
        shifted(-1, -1),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_and_gather_are_inverse() {
        for v in [0u32, 1, 0xdead_beef, u32::MAX, 1 << 26] {
            assert_eq!(gather(spread(v)), v);
            assert_eq!(gather(spread(v) << 1 >> 1), v);
        }
    }

    #[test]
    fn a_score_decodes_near_its_position() {
        for (lon, lat) in [(13.361389, 38.115556), (-179.9, -85.0), (0.0, 0.0)] {
            let score = score_of(lon, lat).unwrap() as f64;
            let (x, y) = position_of(score);
            assert!((x - lon).abs() < 1e-5 && (y - lat).abs() < 1e-5, "{x} {y}");
        }
        assert_eq!(score_of(180.1, 0.0), None);
        assert_eq!(score_of(0.0, 85.06), None);
        assert_eq!(score_of(f64::NAN, 0.0), None);
    }

    #[test]
    fn neighbours_of_a_cell_surround_it() {
        let cell = encode(LONG_RANGE, LAT_RANGE, 10.0, 10.0, 10).unwrap();
        let centre = decode(LONG_RANGE, LAT_RANGE, cell);
        let [north, _, east, ..] = neighbours(cell).map(|c| decode(LONG_RANGE, LAT_RANGE, c));
        assert_eq!(north.latitude.min, centre.latitude.max);
        assert_eq!(east.longitude.min, centre.longitude.max);
    }
}
