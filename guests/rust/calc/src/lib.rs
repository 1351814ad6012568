//! `calc`: a small expression language over JSON values, with tool calls — an example
//! of a guest whose "code" is not Python or JavaScript.
//!
//! ```text
//! let cities = ["Paris", "Oslo"];
//! let temps = [for c in cities: tools.weather(city: c).temp_c];
//! { "mean": sum(temps) / len(temps), "warm": [for t in temps if t > 10: t] }
//! ```
//!
//! - A program is statements separated by `;`: `let name = expr` binds a name, and the
//!   value of the last expression is the run's value (`null` if there is none).
//! - Values are JSON: numbers, `"strings"` (JSON escapes), `true`, `false`, `null`,
//!   `[lists]` and `{objects}` (keys are names or strings). `input` is the run's input.
//! - Operators, loosest first: `if c then a else b`, `or`, `and`, `not`, comparisons
//!   (`== != < <= > >=`), `+ -` (numbers; `+` also joins strings and lists), `* / %`,
//!   unary `-`, then `.field`, `[index]` (negative counts from the end) and calls.
//!   Integer arithmetic stays integral when exact; a missing field is `null`.
//! - `[for x in list if cond: expr]` maps and filters a list.
//! - `tools.name(arg: value, …)` calls a tool; `list_tools()` lists those in scope.
//!   Built-ins: `len`, `sum`, `min`, `max`, `keys`.
//! - `#` starts a comment.
//!
//! Errors are exceptions of the run with Python's kinds (`SyntaxError`, `NameError`,
//! `TypeError`, `ZeroDivisionError`, `IndexError`, `ValueError`; a refused or failed tool
//! call is `ToolDenied`, `ToolFailed`, …) and a traceback pointing into the code.

use serde_json::{json, Map, Number, Value};
use wasmbox_guest::{tools, RunError};

wasmbox_guest::export_runner!(run);

fn run(code: &str, input: Value) -> Result<Value, RunError> {
    let at = |pos: Pos| pos.traceback(code);
    let tokens = lex(code).map_err(|(pos, msg)| RunError::syntax(msg).with_traceback(at(pos)))?;
    let program =
        Parser { tokens, next: 0 }.program().map_err(|(pos, msg)| RunError::syntax(msg).with_traceback(at(pos)))?;
    let mut vars = vec![("input".to_string(), input)];
    let mut value = Value::Null;
    for statement in &program {
        value = match statement {
            Statement::Let(name, expr) => {
                let bound = eval(expr, &mut vars).map_err(|e| e.into_run_error(code))?;
                vars.push((name.clone(), bound));
                Value::Null
            }
            Statement::Expr(expr) => eval(expr, &mut vars).map_err(|e| e.into_run_error(code))?,
        };
    }
    Ok(value)
}

/// A place in the code, for error messages.
#[derive(Clone, Copy, Debug)]
struct Pos {
    line: usize,
    column: usize,
}

impl Pos {
    /// `line L, column C`, the line itself and a caret under the column.
    fn traceback(self, code: &str) -> String {
        let text = code.lines().nth(self.line - 1).unwrap_or("");
        format!("  line {}, column {}\n    {text}\n    {:>width$}\n", self.line, self.column, "^", width = self.column)
    }
}

// ---- lexing ----------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Num(Number),
    Str(String),
    Name(String),
    Sym(&'static str),
    End,
}

const SYMBOLS: &[&str] =
    &["==", "!=", "<=", ">=", "<", ">", "+", "-", "*", "/", "%", "(", ")", "[", "]", "{", "}", ",", ":", ";", ".", "="];

type SyntaxError = (Pos, String);

fn lex(code: &str) -> Result<Vec<(Tok, Pos)>, SyntaxError> {
    let mut tokens = Vec::new();
    for (index, line) in code.lines().enumerate() {
        let mut rest = line;
        loop {
            rest = rest.trim_start();
            let pos = Pos { line: index + 1, column: line.len() - rest.len() + 1 };
            let Some(c) = rest.chars().next() else { break };
            let (tok, len) = if c == '#' {
                break;
            } else if c.is_ascii_digit() {
                let len = number_len(rest.as_bytes());
                let text = &rest[..len];
                let number = match text.parse::<i64>() {
                    Ok(int) => Some(Number::from(int)),
                    Err(_) => text.parse::<f64>().ok().and_then(Number::from_f64),
                };
                (Tok::Num(number.ok_or((pos, format!("`{text}` is not a number")))?), len)
            } else if c.is_alphabetic() || c == '_' {
                let len = rest.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(rest.len());
                (Tok::Name(rest[..len].to_string()), len)
            } else if c == '"' {
                let len = string_len(rest).ok_or((pos, "this string is not closed on its line".to_string()))?;
                let text = serde_json::from_str(&rest[..len]).map_err(|e| (pos, format!("bad string: {e}")))?;
                (Tok::Str(text), len)
            } else {
                let sym = SYMBOLS.iter().find(|s| rest.starts_with(**s)).ok_or((pos, format!("unexpected `{c}`")))?;
                (Tok::Sym(sym), sym.len())
            };
            tokens.push((tok, pos));
            rest = &rest[len..];
        }
    }
    let end = Pos { line: code.lines().count().max(1), column: code.lines().last().map_or(0, str::len) + 1 };
    tokens.push((Tok::End, end));
    Ok(tokens)
}

/// The length of the number at the start of `text`: digits, a fraction, an exponent.
fn number_len(text: &[u8]) -> usize {
    let digits = |mut i: usize| {
        while text.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        i
    };
    let mut len = digits(0);
    if text.get(len) == Some(&b'.') && text.get(len + 1).is_some_and(u8::is_ascii_digit) {
        len = digits(len + 1);
    }
    if matches!(text.get(len), Some(b'e' | b'E')) {
        let start = if matches!(text.get(len + 1), Some(b'+' | b'-')) { len + 2 } else { len + 1 };
        if text.get(start).is_some_and(u8::is_ascii_digit) {
            len = digits(start);
        }
    }
    len
}

/// The length of the string literal at the start of `text`, quotes included.
fn string_len(text: &str) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in text.char_indices().skip(1) {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => return Some(i + 1),
            _ => {}
        }
    }
    None
}

// ---- parsing ---------------------------------------------------------------------

enum Statement {
    Let(String, Expr),
    Expr(Expr),
}

enum Expr {
    Literal(Value),
    Var(String, Pos),
    List(Vec<Expr>),
    Object(Vec<(String, Expr)>),
    Field(Box<Expr>, String, Pos),
    Index(Box<Expr>, Box<Expr>, Pos),
    Not(Box<Expr>),
    Neg(Box<Expr>, Pos),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Binary(&'static str, Box<Expr>, Box<Expr>, Pos),
    If(Box<Expr>, Box<Expr>, Box<Expr>),
    For { var: String, list: Box<Expr>, filter: Option<Box<Expr>>, body: Box<Expr>, pos: Pos },
    Call(String, Vec<Expr>, Pos),
    Tool(String, Vec<(String, Expr)>, Pos),
}

const KEYWORDS: &[&str] = &["let", "if", "then", "else", "and", "or", "not", "for", "in", "true", "false", "null"];

struct Parser {
    tokens: Vec<(Tok, Pos)>,
    next: usize,
}

impl Parser {
    fn peek(&self) -> &Tok {
        &self.tokens[self.next].0
    }

    fn pos(&self) -> Pos {
        self.tokens[self.next].1
    }

    fn bump(&mut self) -> (Tok, Pos) {
        let token = self.tokens[self.next].clone();
        if token.0 != Tok::End {
            self.next += 1;
        }
        token
    }

    /// Consumes the symbol or keyword `word` if it comes next.
    fn eat(&mut self, word: &str) -> bool {
        let found = match self.peek() {
            Tok::Sym(sym) => *sym == word,
            Tok::Name(name) => name == word,
            _ => false,
        };
        if found {
            self.next += 1;
        }
        found
    }

    fn expect(&mut self, word: &str) -> Result<(), SyntaxError> {
        if self.eat(word) {
            Ok(())
        } else {
            Err(self.unexpected(&format!("`{word}`")))
        }
    }

    fn unexpected(&self, wanted: &str) -> SyntaxError {
        (self.pos(), format!("expected {wanted}, found {}", describe(self.peek())))
    }

    fn name(&mut self) -> Result<String, SyntaxError> {
        match self.peek() {
            Tok::Name(name) if !KEYWORDS.contains(&name.as_str()) => {
                let name = name.clone();
                self.next += 1;
                Ok(name)
            }
            _ => Err(self.unexpected("a name")),
        }
    }

    fn program(mut self) -> Result<Vec<Statement>, SyntaxError> {
        let mut statements = Vec::new();
        while *self.peek() != Tok::End {
            if self.eat(";") {
                continue;
            }
            statements.push(if self.eat("let") {
                let name = self.name()?;
                self.expect("=")?;
                Statement::Let(name, self.expr()?)
            } else {
                Statement::Expr(self.expr()?)
            });
            if *self.peek() != Tok::End {
                self.expect(";")?;
            }
        }
        Ok(statements)
    }

    fn expr(&mut self) -> Result<Expr, SyntaxError> {
        if self.eat("if") {
            let cond = self.expr()?;
            self.expect("then")?;
            let then = self.expr()?;
            self.expect("else")?;
            let otherwise = self.expr()?;
            return Ok(Expr::If(Box::new(cond), Box::new(then), Box::new(otherwise)));
        }
        let mut left = self.and()?;
        while self.eat("or") {
            left = Expr::Or(Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Expr, SyntaxError> {
        let mut left = self.not()?;
        while self.eat("and") {
            left = Expr::And(Box::new(left), Box::new(self.not()?));
        }
        Ok(left)
    }

    fn not(&mut self) -> Result<Expr, SyntaxError> {
        if self.eat("not") {
            return Ok(Expr::Not(Box::new(self.not()?)));
        }
        let left = self.binary(0)?;
        let pos = self.pos();
        for op in ["==", "!=", "<=", ">=", "<", ">"] {
            if self.eat(op) {
                return Ok(Expr::Binary(op, Box::new(left), Box::new(self.binary(0)?), pos));
            }
        }
        Ok(left)
    }

    /// Left-associative arithmetic; `level` 0 is `+ -`, 1 is `* / %`.
    fn binary(&mut self, level: usize) -> Result<Expr, SyntaxError> {
        const LEVELS: [&[&str]; 2] = [&["+", "-"], &["*", "/", "%"]];
        let operand = |p: &mut Self| if level == 0 { p.binary(1) } else { p.unary() };
        let mut left = operand(self)?;
        'more: loop {
            let pos = self.pos();
            for op in LEVELS[level] {
                if self.eat(op) {
                    left = Expr::Binary(op, Box::new(left), Box::new(operand(self)?), pos);
                    continue 'more;
                }
            }
            return Ok(left);
        }
    }

    fn unary(&mut self) -> Result<Expr, SyntaxError> {
        let pos = self.pos();
        if self.eat("-") {
            return Ok(Expr::Neg(Box::new(self.unary()?), pos));
        }
        let mut expr = self.primary()?;
        loop {
            let pos = self.pos();
            if self.eat(".") {
                expr = Expr::Field(Box::new(expr), self.name()?, pos);
            } else if self.eat("[") {
                let index = self.expr()?;
                self.expect("]")?;
                expr = Expr::Index(Box::new(expr), Box::new(index), pos);
            } else {
                return Ok(expr);
            }
        }
    }

    fn primary(&mut self) -> Result<Expr, SyntaxError> {
        let pos = self.pos();
        match self.bump().0 {
            Tok::Num(n) => Ok(Expr::Literal(Value::Number(n))),
            Tok::Str(s) => Ok(Expr::Literal(Value::String(s))),
            Tok::Sym("(") => {
                let expr = self.expr()?;
                self.expect(")")?;
                Ok(expr)
            }
            Tok::Sym("[") if self.eat("for") => {
                let var = self.name()?;
                self.expect("in")?;
                let list = Box::new(self.expr()?);
                let filter = if self.eat("if") { Some(Box::new(self.expr()?)) } else { None };
                self.expect(":")?;
                let body = Box::new(self.expr()?);
                self.expect("]")?;
                Ok(Expr::For { var, list, filter, body, pos })
            }
            Tok::Sym("[") => Ok(Expr::List(self.list("]", Self::expr)?)),
            Tok::Sym("{") => Ok(Expr::Object(self.list("}", Self::field)?)),
            Tok::Name(name) => match name.as_str() {
                "true" => Ok(Expr::Literal(json!(true))),
                "false" => Ok(Expr::Literal(json!(false))),
                "null" => Ok(Expr::Literal(Value::Null)),
                "tools" => {
                    self.expect(".")?;
                    let tool = self.name()?;
                    self.expect("(")?;
                    Ok(Expr::Tool(tool, self.list(")", Self::field)?, pos))
                }
                _ if KEYWORDS.contains(&name.as_str()) => Err((pos, format!("expected a value, found `{name}`"))),
                _ if self.eat("(") => Ok(Expr::Call(name, self.list(")", Self::expr)?, pos)),
                _ => Ok(Expr::Var(name, pos)),
            },
            other => Err((pos, format!("expected a value, found {}", describe(&other)))),
        }
    }

    /// `key: value`, where the key is a name or a string.
    fn field(&mut self) -> Result<(String, Expr), SyntaxError> {
        let key = match self.peek().clone() {
            Tok::Str(key) => {
                self.next += 1;
                key
            }
            _ => self.name()?,
        };
        self.expect(":")?;
        Ok((key, self.expr()?))
    }

    /// Comma-separated items up to `close` (a trailing comma is fine).
    fn list<T>(&mut self, close: &str, item: fn(&mut Self) -> Result<T, SyntaxError>) -> Result<Vec<T>, SyntaxError> {
        let mut items = Vec::new();
        while !self.eat(close) {
            items.push(item(self)?);
            if !self.eat(",") {
                self.expect(close)?;
                break;
            }
        }
        Ok(items)
    }
}

fn describe(token: &Tok) -> String {
    match token {
        Tok::Num(n) => format!("`{n}`"),
        Tok::Str(s) => format!("{s:?}"),
        Tok::Name(n) => format!("`{n}`"),
        Tok::Sym(s) => format!("`{s}`"),
        Tok::End => "the end of the code".into(),
    }
}

// ---- evaluation ------------------------------------------------------------------

/// A failed evaluation: the exception, and where it happened.
struct Failure {
    error: RunError,
    pos: Pos,
}

impl Failure {
    fn new(pos: Pos, kind: &str, message: impl Into<String>) -> Self {
        Failure { error: RunError::exception(kind, message), pos }
    }

    fn into_run_error(self, code: &str) -> RunError {
        self.error.with_traceback(self.pos.traceback(code))
    }
}

type Vars = Vec<(String, Value)>;

fn eval(expr: &Expr, vars: &mut Vars) -> Result<Value, Failure> {
    Ok(match expr {
        Expr::Literal(value) => value.clone(),
        Expr::Var(name, pos) => match vars.iter().rev().find(|(n, _)| n == name) {
            Some((_, value)) => value.clone(),
            None => return Err(Failure::new(*pos, "NameError", format!("`{name}` is not defined"))),
        },
        Expr::List(items) => Value::Array(items.iter().map(|e| eval(e, vars)).collect::<Result<_, _>>()?),
        Expr::Object(fields) => Value::Object(object(fields, vars)?),
        Expr::Field(target, field, pos) => match eval(target, vars)? {
            Value::Object(mut map) => map.remove(field).unwrap_or(Value::Null),
            other => return Err(type_error(*pos, format!("`.{field}` on {}", type_name(&other)))),
        },
        Expr::Index(target, index, pos) => index_into(eval(target, vars)?, eval(index, vars)?, *pos)?,
        Expr::Not(operand) => json!(!truthy(&eval(operand, vars)?)),
        Expr::Neg(operand, pos) => arithmetic("-", &json!(0), &eval(operand, vars)?, *pos)?,
        Expr::And(left, right) => {
            let left = eval(left, vars)?;
            if truthy(&left) {
                eval(right, vars)?
            } else {
                left
            }
        }
        Expr::Or(left, right) => {
            let left = eval(left, vars)?;
            if truthy(&left) {
                left
            } else {
                eval(right, vars)?
            }
        }
        Expr::Binary(op, left, right, pos) => {
            let (left, right) = (eval(left, vars)?, eval(right, vars)?);
            match *op {
                "==" => json!(equal(&left, &right)),
                "!=" => json!(!equal(&left, &right)),
                "<" | "<=" | ">" | ">=" => json!(compare(op, &left, &right, *pos)?),
                _ => arithmetic(op, &left, &right, *pos)?,
            }
        }
        Expr::If(cond, then, otherwise) => {
            if truthy(&eval(cond, vars)?) {
                eval(then, vars)?
            } else {
                eval(otherwise, vars)?
            }
        }
        Expr::For { var, list, filter, body, pos } => {
            let Value::Array(items) = eval(list, vars)? else {
                return Err(type_error(*pos, "`for` needs a list".into()));
            };
            let mut out = Vec::new();
            for item in items {
                vars.push((var.clone(), item));
                let result = match filter {
                    Some(filter) if !truthy(&eval(filter, vars)?) => None,
                    _ => Some(eval(body, vars)?),
                };
                vars.pop();
                out.extend(result);
            }
            Value::Array(out)
        }
        Expr::Call(name, args, pos) => {
            let args = args.iter().map(|e| eval(e, vars)).collect::<Result<Vec<_>, _>>()?;
            builtin(name, args, *pos)?
        }
        Expr::Tool(name, fields, pos) => {
            let args = Value::Object(object(fields, vars)?);
            tools::call::<_, Value>(name, &args).map_err(|err| Failure { error: err.into(), pos: *pos })?
        }
    })
}

fn object(fields: &[(String, Expr)], vars: &mut Vars) -> Result<Map<String, Value>, Failure> {
    fields.iter().map(|(key, expr)| Ok((key.clone(), eval(expr, vars)?))).collect()
}

fn builtin(name: &str, args: Vec<Value>, pos: Pos) -> Result<Value, Failure> {
    if name == "list_tools" {
        let list = tools::list().into_iter().map(|t| json!({"name": t.name, "description": t.description}));
        return Ok(Value::Array(list.collect()));
    }
    let [arg] = <[Value; 1]>::try_from(args)
        .map_err(|args| type_error(pos, format!("`{name}` takes 1 argument, not {}", args.len())))?;
    match (name, arg) {
        ("len", Value::String(s)) => Ok(json!(s.chars().count())),
        ("len", Value::Array(items)) => Ok(json!(items.len())),
        ("len", Value::Object(map)) => Ok(json!(map.len())),
        ("keys", Value::Object(map)) => Ok(Value::Array(map.keys().map(|k| json!(k)).collect())),
        ("sum", Value::Array(items)) => {
            items.iter().try_fold(json!(0), |total, item| arithmetic("+", &total, item, pos))
        }
        ("min" | "max", Value::Array(items)) => {
            let mut items = items.into_iter();
            let first =
                items.next().ok_or_else(|| Failure::new(pos, "ValueError", format!("`{name}` of an empty list")))?;
            items.try_fold(first, |best, item| {
                let better = compare(if name == "min" { "<" } else { ">" }, &item, &best, pos)?;
                Ok(if better { item } else { best })
            })
        }
        ("len" | "keys" | "sum" | "min" | "max", arg) => {
            Err(type_error(pos, format!("`{name}` does not take {}", type_name(&arg))))
        }
        _ => Err(Failure::new(pos, "NameError", format!("there is no function `{name}`"))),
    }
}

fn index_into(target: Value, index: Value, pos: Pos) -> Result<Value, Failure> {
    match (target, index) {
        (Value::Array(mut items), Value::Number(n)) => {
            let len = items.len() as i64;
            let i = n.as_i64().ok_or_else(|| type_error(pos, format!("index {n} is not an integer")))?;
            let at = if i < 0 { i + len } else { i };
            if !(0..len).contains(&at) {
                return Err(Failure::new(pos, "IndexError", format!("index {i} is out of range for {len} items")));
            }
            Ok(items.swap_remove(at as usize))
        }
        (Value::Object(mut map), Value::String(key)) => Ok(map.remove(&key).unwrap_or(Value::Null)),
        (target, index) => {
            Err(type_error(pos, format!("cannot index {} with {}", type_name(&target), type_name(&index))))
        }
    }
}

fn arithmetic(op: &str, left: &Value, right: &Value, pos: Pos) -> Result<Value, Failure> {
    match (left, right) {
        (Value::Number(a), Value::Number(b)) => number(op, a, b, pos),
        (Value::String(a), Value::String(b)) if op == "+" => Ok(Value::String(format!("{a}{b}"))),
        (Value::Array(a), Value::Array(b)) if op == "+" => Ok(Value::Array(a.iter().chain(b).cloned().collect())),
        _ => Err(type_error(pos, format!("`{op}` between {} and {}", type_name(left), type_name(right)))),
    }
}

fn number(op: &str, a: &Number, b: &Number, pos: Pos) -> Result<Value, Failure> {
    let zero = || Failure::new(pos, "ZeroDivisionError", format!("`{op}` by zero"));
    if let (Some(x), Some(y)) = (a.as_i64(), b.as_i64()) {
        if y == 0 && (op == "/" || op == "%") {
            return Err(zero());
        }
        let exact = match op {
            "+" => x.checked_add(y),
            "-" => x.checked_sub(y),
            "*" => x.checked_mul(y),
            "%" => x.checked_rem_euclid(y),
            // Integral only when exact, as a calculator would show it.
            _ => x.checked_rem(y).filter(|r| *r == 0).and_then(|_| x.checked_div(y)),
        };
        if let Some(result) = exact {
            return Ok(json!(result));
        }
    }
    let (x, y) = (a.as_f64().unwrap_or(f64::NAN), b.as_f64().unwrap_or(f64::NAN));
    if y == 0.0 && (op == "/" || op == "%") {
        return Err(zero());
    }
    let result = match op {
        "+" => x + y,
        "-" => x - y,
        "*" => x * y,
        "%" => x.rem_euclid(y),
        _ => x / y,
    };
    Number::from_f64(result)
        .map(Value::Number)
        .ok_or_else(|| Failure::new(pos, "OverflowError", format!("`{op}` gives {result}, which is not a JSON number")))
}

fn equal(left: &Value, right: &Value) -> bool {
    match (left, right) {
        // 1 == 1.0, as in JSON's data model.
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        _ => left == right,
    }
}

fn compare(op: &str, left: &Value, right: &Value, pos: Pos) -> Result<bool, Failure> {
    let ordering = match (left, right) {
        (Value::Number(a), Value::Number(b)) => a.as_f64().partial_cmp(&b.as_f64()),
        (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
        _ => None,
    };
    let ordering = ordering
        .ok_or_else(|| type_error(pos, format!("`{op}` between {} and {}", type_name(left), type_name(right))))?;
    Ok(match op {
        "<" => ordering.is_lt(),
        "<=" => ordering.is_le(),
        ">" => ordering.is_gt(),
        _ => ordering.is_ge(),
    })
}

fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(items) => !items.is_empty(),
        Value::Object(map) => !map.is_empty(),
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn type_error(pos: Pos, message: String) -> Failure {
    Failure::new(pos, "TypeError", message)
}
