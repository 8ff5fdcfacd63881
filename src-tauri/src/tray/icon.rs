//! The tray icon with the running count drawn on it at run time: a disc
//! with the number in large digits, readable at 22 px; red while a failure
//! is unseen.

use tauri::image::Image;

/// The base icon (32×32 RGBA).
const BASE: &[u8] = include_bytes!("../../../icons/32x32.png");

/// 3×5 digit glyphs, one row per 3 bits.
const DIGITS: [[u8; 5]; 10] = [
    [0b111, 0b101, 0b101, 0b101, 0b111],
    [0b010, 0b110, 0b010, 0b010, 0b111],
    [0b111, 0b001, 0b111, 0b100, 0b111],
    [0b111, 0b001, 0b111, 0b001, 0b111],
    [0b101, 0b101, 0b111, 0b001, 0b001],
    [0b111, 0b100, 0b111, 0b001, 0b111],
    [0b111, 0b100, 0b111, 0b101, 0b111],
    [0b111, 0b001, 0b010, 0b010, 0b010],
    [0b111, 0b101, 0b111, 0b101, 0b111],
    [0b111, 0b101, 0b111, 0b001, 0b111],
];

/// The icon for `running` runs, red-badged if a failure is unseen.
pub fn draw(running: u64, failure: bool) -> Image<'static> {
    let base = Image::from_bytes(BASE).expect("the base icon is a valid PNG");
    let (w, h) = (base.width() as usize, base.height() as usize);
    let mut rgba = base.rgba().to_vec();
    if running == 0 && !failure {
        return Image::new_owned(rgba, w as u32, h as u32);
    }
    let disc = if failure { [0xd0, 0x2b, 0x2b, 0xff] } else { [0x1b, 0x4f, 0xd8, 0xff] };
    let (cx, cy, r) = (w as f32 / 2.0, h as f32 / 2.0, w as f32 / 2.0 - 0.5);
    for y in 0..h {
        for x in 0..w {
            let (dx, dy) = (x as f32 + 0.5 - cx, y as f32 + 0.5 - cy);
            if dx * dx + dy * dy <= r * r {
                rgba[(y * w + x) * 4..][..4].copy_from_slice(&disc);
            }
        }
    }
    let text = if running > 99 { "99".to_string() } else { running.to_string() };
    let glyphs: Vec<[u8; 5]> = text.bytes().map(|b| DIGITS[(b - b'0') as usize]).collect();
    // Scale 4 for one digit (12×20), 3 for two (each 9×15, gap 3).
    let scale = if glyphs.len() == 1 { 4 } else { 3 };
    let gap = scale;
    let text_w = glyphs.len() * 3 * scale + (glyphs.len() - 1) * gap;
    let (x0, y0) = ((w - text_w) / 2, (h - 5 * scale) / 2);
    for (i, glyph) in glyphs.iter().enumerate() {
        let gx = x0 + i * (3 * scale + gap);
        for (row, bits) in glyph.iter().enumerate() {
            for col in 0..3 {
                if bits & (0b100 >> col) != 0 {
                    for sy in 0..scale {
                        for sx in 0..scale {
                            let (x, y) = (gx + col * scale + sx, y0 + row * scale + sy);
                            rgba[(y * w + x) * 4..][..4].copy_from_slice(&[0xff, 0xff, 0xff, 0xff]);
                        }
                    }
                }
            }
        }
    }
    Image::new_owned(rgba, w as u32, h as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pixel(image: &Image<'_>, x: usize, y: usize) -> [u8; 4] {
        let w = image.width() as usize;
        image.rgba()[(y * w + x) * 4..][..4].try_into().unwrap()
    }

    #[test]
    fn the_count_is_drawn_white_on_a_disc_red_for_unseen_failures() {
        let idle = draw(0, false);
        let base = Image::from_bytes(BASE).unwrap();
        assert_eq!(idle.rgba(), base.rgba(), "nothing running: the plain icon");

        let one = draw(1, false);
        // The disc's edge is blue; the digit's stroke at the center is white.
        assert_eq!(pixel(&one, 16, 4), [0x1b, 0x4f, 0xd8, 0xff]);
        assert_eq!(pixel(&one, 16, 16), [0xff, 0xff, 0xff, 0xff]);
        let failed = draw(3, true);
        assert_eq!(pixel(&failed, 16, 4), [0xd0, 0x2b, 0x2b, 0xff]);
        assert_ne!(draw(12, false).rgba(), draw(13, false).rgba(), "two digits differ");
        assert_eq!(draw(250, false).rgba(), draw(99, false).rgba(), "over 99 shows 99");
    }
}
