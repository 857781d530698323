//! Hashes against the public vectors (tests/vectors/public.json, produced by an independent
//! Python implementation). Path from KVREG_VECTORS, else the file in this source tree.

#[path = "support/json_scan.rs"]
mod json_scan;

use json_scan::{parse_cases, VectorCase};
use kvreg::{block_hash, hash_blocks, sequence_hash, Sequence};

fn load() -> (String, Vec<VectorCase>) {
    let path = std::env::var("KVREG_VECTORS").unwrap_or_else(|_| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../../tests/vectors/public.json").to_string()
    });
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read vectors {}: {} (set KVREG_VECTORS)", path, e));
    let cases = parse_cases(&text).unwrap_or_else(|e| panic!("{}: {}", path, e));
    (text, cases)
}

#[test]
fn scanner_reads_every_case() {
    let (text, cases) = load();
    // Each case has exactly one "note" key; a scanner that skipped cases would test less.
    assert!(!cases.is_empty());
    assert_eq!(cases.len(), text.matches("\"note\":").count());
    for case in &cases {
        assert_eq!(case.blocks.len(), case.tokens.len() / case.block_size as usize, "{}", case.note);
    }
    // The seed case: Dynamo 1.0.x's own vectors (dynamo-llm's block registry test,
    // create_sequence: tokens 1..10, block size 4, salt 1337), written out here by hand so the
    // check proves the scanner read the right fields.
    let seed = &cases[0];
    assert_eq!(seed.tokens, (1..=10).collect::<Vec<u32>>());
    assert_eq!((seed.block_size, seed.salt), (4, 1337));
    assert_eq!(seed.blocks[0].block_hash, 14643705804678351452);
    assert_eq!(seed.blocks[1].block_hash, 16777012769546811212);
    assert_eq!(seed.blocks[1].sequence_hash, 4945711292740353085);
    assert_eq!(seed.blocks[1].parent_sequence_hash, Some(14643705804678351452));
    assert_eq!(seed.partial_tokens, vec![9, 10]);
}

#[test]
fn hash_blocks_matches_vectors() {
    for case in load().1 {
        let got = hash_blocks(&case.tokens, case.block_size, case.salt).unwrap();
        assert_eq!(got.len(), case.blocks.len(), "{}", case.note);
        for (i, (g, want)) in got.iter().zip(&case.blocks).enumerate() {
            assert_eq!(g.block_hash, want.block_hash, "{} block {}", case.note, i);
            assert_eq!(g.sequence_hash, want.sequence_hash, "{} block {}", case.note, i);
            assert_eq!(g.parent_sequence_hash, want.parent_sequence_hash, "{} block {}", case.note, i);
            assert_eq!(g.position, Some(i as u32), "{} block {}", case.note, i);
        }
    }
}

#[test]
fn single_step_functions_match_vectors() {
    for case in load().1 {
        for (i, want) in case.blocks.iter().enumerate() {
            assert_eq!(block_hash(&want.tokens, case.salt), want.block_hash, "{} block {}", case.note, i);
            if let Some(parent) = want.parent_sequence_hash {
                let chained = sequence_hash(parent, want.block_hash, case.salt);
                assert_eq!(chained, want.sequence_hash, "{} block {}", case.note, i);
            } else {
                assert_eq!(want.sequence_hash, want.block_hash, "{}: first block is not re-hashed", case.note);
            }
        }
    }
}

#[test]
fn sequence_matches_vectors() {
    for case in load().1 {
        // Whole input at once, and one token at a time: eager commit must give the same blocks.
        let whole = Sequence::from_tokens(&case.tokens, case.block_size, case.salt).unwrap();
        let mut stepwise = Sequence::new(case.block_size, case.salt).unwrap();
        for &t in &case.tokens {
            stepwise.append(t).unwrap();
        }
        for seq in [&whole, &stepwise] {
            assert_eq!(seq.num_blocks(), case.blocks.len(), "{}", case.note);
            assert_eq!(seq.total_tokens(), case.tokens.len(), "{}", case.note);
            assert_eq!(seq.partial_tokens(), &case.partial_tokens[..], "{}", case.note);
            for (i, want) in case.blocks.iter().enumerate() {
                let info = seq.block(i).unwrap();
                assert_eq!(info.block_hash, want.block_hash, "{} block {}", case.note, i);
                assert_eq!(info.sequence_hash, want.sequence_hash, "{} block {}", case.note, i);
                assert_eq!(info.parent_sequence_hash, want.parent_sequence_hash, "{} block {}", case.note, i);
                assert_eq!(seq.block_tokens(i).unwrap(), &want.tokens[..], "{} block {}", case.note, i);
            }
        }
    }
}
