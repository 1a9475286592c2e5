//! Reading order: the page's skew undone, recursive XY cuts into columns and bands, then rows.

use crate::Quad;

/// One line read on a page: its text and its box with the page's skew undone (x right, y down,
/// in the page's pixels).
#[derive(Debug, Clone, PartialEq)]
pub struct TextLine {
    pub text: String,
    pub left: f32,
    pub top: f32,
    pub right: f32,
    pub bottom: f32,
}

impl TextLine {
    /// The line of `quad`, its box taken after turning the page by `-skew` radians.
    pub(crate) fn new(text: String, quad: &Quad, skew: f32) -> TextLine {
        let (sin, cos) = (-skew).sin_cos();
        let straight = quad.0.map(|(x, y)| (x * cos - y * sin, x * sin + y * cos));
        let fold =
            |f: fn(f32, f32) -> f32, start: f32, pick: fn(&(f32, f32)) -> f32| straight.iter().map(pick).fold(start, f);
        TextLine {
            text,
            left: fold(f32::min, f32::MAX, |p| p.0),
            right: fold(f32::max, f32::MIN, |p| p.0),
            top: fold(f32::min, f32::MAX, |p| p.1),
            bottom: fold(f32::max, f32::MIN, |p| p.1),
        }
    }

    fn height(&self) -> f32 {
        self.bottom - self.top
    }
}

/// The page's skew in radians: the median slope of its lines' top edges.
pub(crate) fn skew(boxes: &[Quad]) -> f32 {
    let mut angles: Vec<f32> = boxes.iter().map(|Quad([tl, tr, _, _])| (tr.1 - tl.1).atan2(tr.0 - tl.0)).collect();
    angles.sort_by(f32::total_cmp);
    angles.get(angles.len() / 2).copied().unwrap_or(0.0)
}

/// The lines' text in reading order: one output line per row of the page.
pub fn reading_order(lines: &[TextLine]) -> String {
    let mut heights: Vec<f32> = lines.iter().map(TextLine::height).collect();
    heights.sort_by(f32::total_cmp);
    let line_height = heights.get(heights.len() / 2).copied().unwrap_or(20.0).max(1.0);
    let mut rows = Vec::new();
    cut(lines.iter().collect(), line_height, &mut rows);
    join_rows(&rows)
}

/// The rows as lines of text, a word hyphenated at a row's end joined again ("algo-" and
/// "rithm" make "algorithm"), as a text layer's extraction gives it.
fn join_rows(rows: &[String]) -> String {
    let mut text = String::new();
    for row in rows {
        let hyphenated = text.strip_suffix('-').is_some_and(|t| t.ends_with(char::is_alphabetic));
        if hyphenated && row.starts_with(char::is_lowercase) {
            text.pop();
        } else if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(row);
    }
    text
}

/// XY cut: the widest gap across either direction splits the lines in two (a gap between
/// columns must be at least 1.5 line heights wide, crossed by no line, with a column of prose
/// before it; one between bands a fifth of a line height); each part is cut again. What cannot
/// be cut is read as rows, so a table's cells stay with their row.
fn cut(lines: Vec<&TextLine>, line_height: f32, rows: &mut Vec<String>) {
    if lines.len() > 1 {
        let between_columns = widest_gap(lines.iter().map(|l| (l.left, l.right)), 1.5 * line_height)
            .filter(|&(_, at)| is_prose_column(lines.iter().copied().filter(|l| l.right <= at), line_height));
        let between_bands = widest_gap(lines.iter().map(|l| (l.top, l.bottom)), 0.2 * line_height);
        let split = match (between_columns, between_bands) {
            (Some(c), Some(b)) if c.0 >= b.0 => Some((c.1, true)),
            (_, Some(b)) => Some((b.1, false)),
            (Some(c), None) => Some((c.1, true)),
            (None, None) => None,
        };
        if let Some((at, columns)) = split {
            let (first, second): (Vec<&TextLine>, Vec<&TextLine>) =
                lines.into_iter().partition(|l| if columns { l.right <= at } else { l.bottom <= at });
            cut(first, line_height, rows);
            cut(second, line_height, rows);
            return;
        }
    }
    read_rows(lines, rows);
}

/// A column of prose, not a table's column of names: at least eight line heights wide (some
/// thirty characters), with most of its lines running to its right edge (within two line
/// heights: ragged or justified text), as a table's cells rarely do.
fn is_prose_column<'a>(lines: impl Iterator<Item = &'a TextLine>, line_height: f32) -> bool {
    let lines: Vec<&TextLine> = lines.collect();
    let left = lines.iter().map(|l| l.left).fold(f32::MAX, f32::min);
    let right = lines.iter().map(|l| l.right).fold(f32::MIN, f32::max);
    let full = lines.iter().filter(|l| l.right >= right - 2.0 * line_height).count();
    right - left >= 8.0 * line_height && full * 5 >= lines.len() * 3
}

/// Lines whose middles fall within one another's height make a row, read left to right.
fn read_rows(mut lines: Vec<&TextLine>, rows: &mut Vec<String>) {
    lines.sort_by(|a, b| (a.top + a.bottom).total_cmp(&(b.top + b.bottom)));
    let mut current: Vec<&TextLine> = Vec::new();
    let mut flush = |row: &mut Vec<&TextLine>| {
        row.sort_by(|a, b| a.left.total_cmp(&b.left));
        if !row.is_empty() {
            rows.push(row.iter().map(|l| l.text.as_str()).collect::<Vec<_>>().join(" "));
        }
        row.clear();
    };
    for line in lines {
        let middle = (line.top + line.bottom) / 2.0;
        if !current.iter().any(|r| middle > r.top && middle < r.bottom) {
            flush(&mut current);
        }
        current.push(line);
    }
    flush(&mut current);
}

/// The widest gap of at least `least` between the spans' union: its width and its middle.
fn widest_gap(spans: impl Iterator<Item = (f32, f32)>, least: f32) -> Option<(f32, f32)> {
    let mut spans: Vec<(f32, f32)> = spans.collect();
    spans.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut end = spans.first()?.1;
    let mut widest: Option<(f32, f32)> = None;
    for &(start, stop) in &spans[1..] {
        let gap = start - end;
        if gap >= least && widest.is_none_or(|(w, _)| gap > w) {
            widest = Some((gap, (start + end) / 2.0));
        }
        end = end.max(stop);
    }
    widest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(text: &str, left: f32, top: f32, right: f32) -> TextLine {
        TextLine { text: text.into(), left, top, right, bottom: top + 20.0 }
    }

    #[test]
    fn two_columns_under_a_title_are_read_column_by_column() {
        // The columns' lines are level with each other: a row-by-row reading would interleave them.
        let mut lines = vec![line("Title across both columns", 10.0, 0.0, 600.0)];
        for (i, y) in [40.0, 70.0, 100.0].into_iter().enumerate() {
            lines.push(line(&format!("left {i}"), 10.0, y, 280.0));
            lines.push(line(&format!("right {i}"), 330.0, y, 600.0));
        }
        assert_eq!(
            reading_order(&lines),
            "Title across both columns\nleft 0\nleft 1\nleft 2\nright 0\nright 1\nright 2"
        );
    }

    #[test]
    fn a_word_hyphenated_at_a_line_end_is_joined() {
        let rows = ["an algo-", "rithm and a well-", "Known name", "x -", "y"].map(String::from);
        assert_eq!(join_rows(&rows), "an algorithm and a well-\nKnown name\nx -\ny");
    }

    #[test]
    fn cells_of_a_row_are_one_line_left_to_right() {
        let lines =
            vec![line("value", 200.0, 10.0, 260.0), line("name", 10.0, 12.0, 60.0), line("next", 10.0, 40.0, 60.0)];
        assert_eq!(reading_order(&lines), "name value\nnext");
    }

    #[test]
    fn a_skewed_page_is_read_as_if_straight() {
        // Two lines rising 2° to the right, one above the other: their upright boxes overlap in
        // height, the straightened ones do not.
        let angle = -2f32.to_radians();
        let (sin, cos) = angle.sin_cos();
        let turn = |x: f32, y: f32| (x * cos - y * sin, x * sin + y * cos);
        let quad = |y: f32| Quad([turn(0.0, y), turn(1000.0, y), turn(1000.0, y + 20.0), turn(0.0, y + 20.0)]);
        let quads = [quad(100.0), quad(126.0)];
        let skew = skew(&quads);
        assert!((skew - angle).abs() < 1e-4, "{skew}");
        let lines =
            vec![TextLine::new("second".into(), &quads[1], skew), TextLine::new("first".into(), &quads[0], skew)];
        assert_eq!(reading_order(&lines), "first\nsecond");
    }
}
