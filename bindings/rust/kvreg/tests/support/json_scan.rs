//! Reads the test vectors file (tests/vectors/public.json) without a JSON crate.
//!
//! Not a JSON parser: a lexer plus a walk that tracks which keys enclose each value, picking out
//! only the fields the tests use. u64 values are taken from the `*_str` decimal strings (the
//! bare integers may exceed 2^53, which some generators round). Anything unexpected in the
//! fields we read is an error, so a format change fails loudly instead of testing nothing.

pub struct VectorBlock {
    pub tokens: Vec<u32>,
    pub block_hash: u64,
    pub sequence_hash: u64,
    pub parent_sequence_hash: Option<u64>,
}

pub struct VectorCase {
    pub note: String,
    pub tokens: Vec<u32>,
    pub block_size: u32,
    pub salt: u64,
    pub blocks: Vec<VectorBlock>,
    pub partial_tokens: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Open(char),
    Close,
    Colon,
    Comma,
    Str(String),
    Num(String),
    Null,
    Bool,
}

fn lex(text: &str) -> Result<Vec<Tok>, String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\n' | '\r' | '\t' => {}
            '{' | '[' => out.push(Tok::Open(c)),
            '}' | ']' => out.push(Tok::Close),
            ':' => out.push(Tok::Colon),
            ',' => out.push(Tok::Comma),
            '"' => {
                let mut s = String::new();
                loop {
                    match chars.next() {
                        None => return Err("unterminated string".into()),
                        Some('"') => break,
                        // Escapes only occur in free text we never compare (e.g. json_bytes);
                        // keeping the escaped char is enough to not end the string early.
                        Some('\\') => s.push(chars.next().ok_or("dangling escape")?),
                        Some(ch) => s.push(ch),
                    }
                }
                out.push(Tok::Str(s));
            }
            '-' | '0'..='9' => {
                let mut s = c.to_string();
                while let Some(&d) = chars.peek() {
                    if d.is_ascii_digit() || "+-.eE".contains(d) {
                        s.push(d);
                        chars.next();
                    } else {
                        break;
                    }
                }
                out.push(Tok::Num(s));
            }
            'n' | 't' | 'f' => {
                let mut word = c.to_string();
                while let Some(&d) = chars.peek() {
                    if d.is_ascii_alphabetic() {
                        word.push(d);
                        chars.next();
                    } else {
                        break;
                    }
                }
                match word.as_str() {
                    "null" => out.push(Tok::Null),
                    "true" | "false" => out.push(Tok::Bool),
                    _ => return Err(format!("bad literal {:?}", word)),
                }
            }
            _ => return Err(format!("unexpected character {:?}", c)),
        }
    }
    Ok(out)
}

/// One open object or array and the key it is the value of (None for array elements).
struct Frame {
    key: Option<String>,
}

#[derive(Default)]
struct RawBlock {
    tokens: Vec<u32>,
    block_hash: Option<u64>,
    sequence_hash: Option<u64>,
    parent: Option<Option<u64>>,
}

#[derive(Default)]
struct RawCase {
    note: String,
    tokens: Vec<u32>,
    block_size: Option<u32>,
    salt: Option<u64>,
    blocks: Vec<RawBlock>,
    partial_tokens: Vec<u32>,
}

fn u32_of(t: &Tok) -> Result<u32, String> {
    match t {
        Tok::Num(s) => s.parse().map_err(|_| format!("not a u32: {}", s)),
        other => Err(format!("expected a number, got {:?}", other)),
    }
}

fn u64_str_of(t: &Tok) -> Result<u64, String> {
    match t {
        Tok::Str(s) => s.parse().map_err(|_| format!("not a u64 string: {}", s)),
        other => Err(format!("expected a decimal string, got {:?}", other)),
    }
}

/// Every entry of the top-level "cases" array.
pub fn parse_cases(text: &str) -> Result<Vec<VectorCase>, String> {
    let toks = lex(text)?;
    let mut stack: Vec<Frame> = Vec::new();
    let mut pending_key: Option<String> = None;
    let mut cases: Vec<RawCase> = Vec::new();

    let mut i = 0;
    while i < toks.len() {
        let tok = &toks[i];
        i += 1;
        match tok {
            Tok::Comma | Tok::Colon => continue,
            Tok::Open(c) => {
                stack.push(Frame { key: pending_key.take() });
                if *c == '{' {
                    match keys(&stack).as_slice() {
                        [None, Some("cases"), None] => cases.push(RawCase::default()),
                        [None, Some("cases"), None, Some("blocks"), None] => {
                            last(&mut cases)?.blocks.push(RawBlock::default())
                        }
                        _ => {}
                    }
                }
                continue;
            }
            Tok::Close => {
                stack.pop().ok_or("unbalanced close")?;
                pending_key = None;
                continue;
            }
            Tok::Str(s) if pending_key.is_none() && toks.get(i) == Some(&Tok::Colon) => {
                pending_key = Some(s.clone());
                continue;
            }
            _ => {}
        }

        // A scalar value: inside an object it belongs to pending_key, inside an array to the
        // array's own key (the last frame's).
        let key = pending_key.take();
        let path = keys(&stack);
        match (path.as_slice(), key.as_deref()) {
            ([None, Some("cases"), None], Some("note")) => {
                if let Tok::Str(s) = tok {
                    last(&mut cases)?.note = s.clone();
                }
            }
            ([None, Some("cases"), None], Some("block_size")) => {
                last(&mut cases)?.block_size = Some(u32_of(tok)?)
            }
            ([None, Some("cases"), None], Some("salt_str")) => {
                last(&mut cases)?.salt = Some(u64_str_of(tok)?)
            }
            ([None, Some("cases"), None, Some("tokens")], None) => {
                last(&mut cases)?.tokens.push(u32_of(tok)?)
            }
            ([None, Some("cases"), None, Some("partial_tokens")], None) => {
                last(&mut cases)?.partial_tokens.push(u32_of(tok)?)
            }
            ([None, Some("cases"), None, Some("blocks"), None], Some(field)) => {
                let block = last(&mut last(&mut cases)?.blocks)?;
                match field {
                    "block_hash_str" => block.block_hash = Some(u64_str_of(tok)?),
                    "sequence_hash_str" => block.sequence_hash = Some(u64_str_of(tok)?),
                    "parent_sequence_hash_str" => {
                        block.parent = Some(if *tok == Tok::Null { None } else { Some(u64_str_of(tok)?) })
                    }
                    _ => {}
                }
            }
            ([None, Some("cases"), None, Some("blocks"), None, Some("tokens")], None) => {
                let block = last(&mut last(&mut cases)?.blocks)?;
                block.tokens.push(u32_of(tok)?)
            }
            _ => {}
        }
    }
    if !stack.is_empty() {
        return Err("unbalanced open".into());
    }

    cases
        .into_iter()
        .map(|c| {
            let note = c.note;
            let missing = |what: &str| format!("case {:?}: missing {}", note, what);
            let mut blocks = Vec::new();
            for b in c.blocks {
                blocks.push(VectorBlock {
                    tokens: b.tokens,
                    block_hash: b.block_hash.ok_or_else(|| missing("block_hash_str"))?,
                    sequence_hash: b.sequence_hash.ok_or_else(|| missing("sequence_hash_str"))?,
                    parent_sequence_hash: b.parent.ok_or_else(|| missing("parent_sequence_hash_str"))?,
                });
            }
            Ok(VectorCase {
                block_size: c.block_size.ok_or_else(|| missing("block_size"))?,
                salt: c.salt.ok_or_else(|| missing("salt_str"))?,
                note: note.clone(),
                tokens: c.tokens,
                blocks,
                partial_tokens: c.partial_tokens,
            })
        })
        .collect()
}

fn keys(stack: &[Frame]) -> Vec<Option<&str>> {
    stack.iter().map(|f| f.key.as_deref()).collect()
}

fn last<T>(v: &mut [T]) -> Result<&mut T, String> {
    v.last_mut().ok_or_else(|| "value outside its object".to_string())
}
