//! The operands of the product a thread computes next, asked into L2 while it computes this one.
//!
//! A batch of small products ([`batched`](super::batched)) hands a thread member after member.
//! Once the batch is larger than the L2, each member's operands come from the L3 or memory, and
//! a small member's first tiles wait for its lines: its rows are too short for the hardware's
//! prefetchers to get ahead of them. The thread knows the member it computes next, so while the
//! [`unpacked`](super::unpacked) tiles compute one member they ask for the next one's lines
//! ([`Cursor::ask`]), a few after each stretch of steps, so that the requests spread over the
//! member instead of filling the queue of outstanding misses at once.
//!
//! The batch says which member comes next through [`set_next`], and the unpacked kernel takes
//! it ([`take_next`]): a hint that changes no result, whatever it names.

use std::cell::Cell;

use super::simd::{LINE_BYTES, prefetch_l2};
use crate::matrix::{MatRef, span};

/// Lines asked for at each [`Cursor::ask`]: a tile asks after each of its stretches of steps
/// (a row of its `C` each), so a member of `t` tiles of `R` rows asks for `4 t R` lines.
pub const LINES_PER_ASK: usize = 4;

/// The stretches of memory of the next product, in the order its tiles first read them: `B`
/// (every row of tiles reads all of it), `A`, then `C`. Each is a range of addresses, from the
/// cache line of its first value to past its last.
#[derive(Clone, Copy, Debug, Default)]
pub struct Upcoming {
    ranges: [(usize, usize); 3],
}

impl Upcoming {
    /// The operands `a`, `b` and `c` of the next product (any layouts), as far as `budget`
    /// bytes of them: what the L2 can hold beside the product being computed. An operand whose
    /// values are spread over more than twice their number of bytes (a view into a wider
    /// matrix) is left out: most of its range would be lines it does not use.
    pub fn new(a: &MatRef, b: &MatRef, c: &MatRef, budget: usize) -> Self {
        let mut left = budget;
        let ranges = [b, a, c].map(|x| {
            let bytes = span(x.layout, x.rows, x.cols, x.ld) * size_of::<f32>();
            let values = x.rows * x.cols * size_of::<f32>();
            if bytes == 0 || bytes > 2 * values || left == 0 {
                return (0, 0);
            }
            let start = x.data.as_ptr() as usize & !(LINE_BYTES - 1);
            let end = x.data.as_ptr() as usize + bytes.min(left);
            left = left.saturating_sub(bytes);
            (start, end)
        });
        Upcoming { ranges }
    }
}

/// A walk over the lines of an [`Upcoming`] product, [`LINES_PER_ASK`] at a time.
#[derive(Debug)]
pub struct Cursor {
    ranges: [(usize, usize); 3],
    /// The range being walked (3: all are done), and its next line and end.
    range: usize,
    next: usize,
    end: usize,
}

impl Cursor {
    /// A walk over `upcoming`'s lines (over none for `None`).
    pub fn new(upcoming: Option<Upcoming>) -> Self {
        let ranges = upcoming.unwrap_or_default().ranges;
        let (next, end) = ranges[0];
        Cursor { ranges, range: 0, next, end }
    }

    /// Asks for the next [`LINES_PER_ASK`] lines into L2; nothing once every range is done.
    /// The last ask of a range may ask for a few lines past its end: a hint, harmless.
    #[inline(always)]
    pub fn ask(&mut self) {
        if let Some(first) = self.take() {
            for line in 0..LINES_PER_ASK {
                prefetch_l2((first + line * LINE_BYTES) as *const f32);
            }
        }
    }

    /// The address of the next [`LINES_PER_ASK`] lines, which the cursor then passes; `None`
    /// once every range is done.
    #[inline(always)]
    fn take(&mut self) -> Option<usize> {
        if self.next >= self.end && (self.range >= 3 || !self.next_range()) {
            return None;
        }
        let first = self.next;
        self.next += LINES_PER_ASK * LINE_BYTES;
        Some(first)
    }

    /// Moves to the next range that is not empty; false when there is none (then `range` is 3).
    #[cold]
    fn next_range(&mut self) -> bool {
        while self.range < 3 {
            self.range += 1;
            if let Some(&(next, end)) = self.ranges.get(self.range)
                && next < end
            {
                (self.next, self.end) = (next, end);
                return true;
            }
        }
        false
    }
}

thread_local! {
    /// The product this thread computes after the current one, set by a batch.
    static NEXT: Cell<Option<Upcoming>> = const { Cell::new(None) };
}

/// Says that this thread computes `next` after the product it computes now (`None`: nothing
/// known).
pub fn set_next(next: Option<Upcoming>) {
    NEXT.with(|n| n.set(next));
}

/// The product this thread computes next, if a batch said so; taken, so that no later product
/// is told of it again.
pub fn take_next() -> Option<Upcoming> {
    NEXT.with(Cell::take)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::Layout;

    /// The lines a cursor over `upcoming` asks for, in order.
    fn walked(upcoming: Upcoming) -> Vec<usize> {
        let mut cursor = Cursor::new(Some(upcoming));
        std::iter::from_fn(|| cursor.take())
            .flat_map(|first| (0..LINES_PER_ASK).map(move |l| first + l * LINE_BYTES))
            .collect()
    }

    /// The lines holding the values of `x`.
    fn lines_of(x: &MatRef) -> Vec<usize> {
        let mut lines: Vec<usize> = (0..x.rows)
            .flat_map(|i| (0..x.cols).map(move |j| (i, j)))
            .map(|(i, j)| {
                let (row, col) = x.strides();
                x.data[i * row + j * col..].as_ptr() as usize & !(LINE_BYTES - 1)
            })
            .collect();
        lines.sort_unstable();
        lines.dedup();
        lines
    }

    #[test]
    fn the_cursor_asks_for_every_line_of_b_then_a_then_c_within_the_budget() {
        let buffer = vec![0.0f32; 1 << 16];
        // Operands off a line's start, in both layouts, one with spare columns.
        let b = MatRef { data: &buffer[5..], rows: 33, cols: 20, ld: 20, layout: Layout::RowMajor };
        let a = MatRef { data: &buffer[3000..], rows: 17, cols: 33, ld: 19, layout: Layout::ColMajor };
        let c = MatRef { data: &buffer[9001..], rows: 17, cols: 20, ld: 23, layout: Layout::RowMajor };
        let asked = walked(Upcoming::new(&a, &b, &c, usize::MAX));
        let order: Vec<usize> = [&b, &a, &c].iter().flat_map(|x| lines_of(x)).collect();
        // Every line of each operand, in that order, each once; at most a few past each end.
        let mut at = 0;
        for line in order {
            let found = asked[at..].iter().position(|&l| l == line).expect("every line asked for");
            assert!(found < LINES_PER_ASK, "lines asked for in order, none skipped");
            at += found + 1;
        }
        assert!(
            asked.len() <= lines_of(&a).len() + lines_of(&b).len() + lines_of(&c).len() + 3 * LINES_PER_ASK
        );

        // Within a budget of one operand's bytes, only B's lines.
        let budget = span(b.layout, b.rows, b.cols, b.ld) * size_of::<f32>();
        let only_b = walked(Upcoming::new(&a, &b, &c, budget));
        assert!(lines_of(&b).iter().all(|l| only_b.contains(l)));
        assert!(only_b.len() < lines_of(&b).len() + LINES_PER_ASK + 1);
    }

    #[test]
    fn operands_spread_over_more_than_twice_their_bytes_are_left_out() {
        let buffer = vec![0.0f32; 1 << 16];
        let dense = MatRef { data: &buffer, rows: 16, cols: 16, ld: 16, layout: Layout::RowMajor };
        // A head of 16 columns in rows of 256: its range is mostly other heads' lines.
        let head = MatRef { data: &buffer[4096..], rows: 16, cols: 16, ld: 256, layout: Layout::RowMajor };
        let asked = walked(Upcoming::new(&head, &dense, &head, usize::MAX));
        assert_eq!(asked.len().div_ceil(LINES_PER_ASK), lines_of(&dense).len().div_ceil(LINES_PER_ASK));
        assert!(walked(Upcoming::default()).is_empty() && Cursor::new(None).take().is_none());
    }
}
