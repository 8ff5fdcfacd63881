//! The tray icon with the running count drawn on it at run time: a disc
//! with the number in large digits, readable at 22 px; red while something
//! needs the user (an unseen failure or denial, a run retrying).

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

/// The base icon's pixels: RGBA, width, height.
fn base() -> (Vec<u8>, u32, u32) {
    let mut decoder = png::Decoder::new(std::io::Cursor::new(BASE));
    // Whatever the file's colour type, RGBA with 8 bits a channel.
    decoder.set_transformations(png::Transformations::normalize_to_color8() | png::Transformations::ALPHA);
    let mut reader = decoder.read_info().expect("the base icon is a valid PNG");
    let mut rgba = vec![0; reader.output_buffer_size().expect("a small icon")];
    let info = reader.next_frame(&mut rgba).expect("the base icon is a valid PNG");
    rgba.truncate(info.buffer_size());
    (rgba, info.width, info.height)
}

/// The icon for `running` runs as RGBA, width, height: red if something
/// needs the user (`attention`).
pub fn draw(running: u64, attention: bool) -> (Vec<u8>, u32, u32) {
    let (mut rgba, w, h) = base();
    let (w, h) = (w as usize, h as usize);
    if running == 0 && !attention {
        return (rgba, w as u32, h as u32);
    }
    let disc = if attention { [0xd0, 0x2b, 0x2b, 0xff] } else { [0x1b, 0x4f, 0xd8, 0xff] };
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
    (rgba, w as u32, h as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pixel(image: &(Vec<u8>, u32, u32), x: usize, y: usize) -> [u8; 4] {
        let w = image.1 as usize;
        image.0[(y * w + x) * 4..][..4].try_into().unwrap()
    }

    #[test]
    fn the_count_is_drawn_white_on_a_disc_red_while_something_needs_the_user() {
        let idle = draw(0, false);
        assert_eq!(idle, base(), "nothing running: the plain icon");
        assert_eq!((idle.1, idle.2), (32, 32));
        assert_eq!(idle.0.len(), 32 * 32 * 4);

        let one = draw(1, false);
        // The disc's edge is blue; the digit's stroke at the center is white.
        assert_eq!(pixel(&one, 16, 4), [0x1b, 0x4f, 0xd8, 0xff]);
        assert_eq!(pixel(&one, 16, 16), [0xff, 0xff, 0xff, 0xff]);
        let failed = draw(3, true);
        assert_eq!(pixel(&failed, 16, 4), [0xd0, 0x2b, 0x2b, 0xff]);
        assert_ne!(draw(12, false), draw(13, false), "two digits differ");
        assert_eq!(draw(250, false), draw(99, false), "over 99 shows 99");
    }
}
