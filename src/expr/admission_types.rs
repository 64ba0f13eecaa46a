//! The static types of MutatingAdmissionPolicy expressions, as far as they are evident
//! from the syntax: what the apiserver's two type-dependent checks need, the
//! homogeneous literal check and the result type check ([`super::admission_check`]).
//!
//! cel-go type-checks every expression; graft has no checker. This infers the type of
//! literals, of `object`, `oldObject` and `params` (`dyn`, and so every field of them),
//! of `request`'s plain fields, of conversions, operators, the comprehensions the macros
//! expand to and the functions whose result type does not depend on their arguments.
//! Anything else is `None`, unknown: the checks that need a type skip it, so that graft
//! never refuses what the apiserver accepts because of a guess.

use std::fmt;

use cel::common::ast::{ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue, operators};

use crate::k8s::schema::{Scalar, Shape, TypeRef};

/// A CEL type, as cel-go prints it (`FormatCELType`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ty {
    Int,
    Uint,
    Double,
    Bool,
    String,
    Bytes,
    Null,
    Dyn,
    Type,
    Timestamp,
    Duration,
    List(Box<Ty>),
    Map(Box<Ty>, Box<Ty>),
    Optional(Box<Ty>),
    /// `Object`, `Object.spec`, `JSONPatch`, ...
    Struct(String),
    /// The element of an empty list literal: whatever it is joined with (printed `dyn`,
    /// as cel-go prints a type parameter nothing bound).
    Free,
    /// An object of a Kubernetes struct type (`core.v1.PodSpec`), when the kind an
    /// expression reads is known ([`Scope::with_object`]): its fields have their types.
    Kube(TypeRef<'static>),
}

impl fmt::Display for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ty::Int => f.write_str("int"),
            Ty::Uint => f.write_str("uint"),
            Ty::Double => f.write_str("double"),
            Ty::Bool => f.write_str("bool"),
            Ty::String => f.write_str("string"),
            Ty::Bytes => f.write_str("bytes"),
            Ty::Null => f.write_str("null_type"),
            Ty::Dyn | Ty::Free => f.write_str("dyn"),
            Ty::Type => f.write_str("type"),
            Ty::Timestamp => f.write_str("google.protobuf.Timestamp"),
            Ty::Duration => f.write_str("google.protobuf.Duration"),
            Ty::List(element) => write!(f, "list({element})"),
            Ty::Map(key, value) => write!(f, "map({key}, {value})"),
            Ty::Optional(inner) => write!(f, "optional_type({inner})"),
            Ty::Struct(name) => f.write_str(name),
            Ty::Kube(ty) => match ty.shape() {
                Shape::Struct(s) => f.write_str(s.name()),
                _ => f.write_str("dyn"),
            },
        }
    }
}

impl Ty {
    /// The name of the type without its parameters, as cel-go's `TypeName`: `list`,
    /// `map`, `int`.
    pub fn type_name(&self) -> String {
        match self {
            Ty::List(_) => "list".to_owned(),
            Ty::Map(..) => "map".to_owned(),
            Ty::Optional(_) => "optional_type".to_owned(),
            other => other.to_string(),
        }
    }

    /// Whether the type is fully known: the homogeneity check compares only those.
    pub fn is_definite(&self) -> bool {
        match self {
            Ty::Free => false,
            Ty::List(t) | Ty::Optional(t) => t.is_definite(),
            Ty::Map(k, v) => k.is_definite() && v.is_definite(),
            _ => true,
        }
    }

    fn element(&self) -> Option<Ty> {
        match self {
            Ty::List(element) => Some(*element.clone()),
            Ty::Map(key, _) => Some(*key.clone()),
            Ty::Dyn => Some(Ty::Dyn),
            _ => None,
        }
    }
}

/// Two branches or operands joined: the same type, a list literal's free element
/// taking the other's, `dyn` absorbing the rest; `None` where cel-go would refuse or
/// decide otherwise.
pub fn join(a: Ty, b: Ty) -> Option<Ty> {
    match (a, b) {
        (a, b) if a == b => Some(a),
        (Ty::Free, other) | (other, Ty::Free) => Some(other),
        (Ty::List(a), Ty::List(b)) => join(*a, *b).map(|t| Ty::List(Box::new(t))),
        (Ty::Map(ka, va), Ty::Map(kb, vb)) => Some(Ty::Map(
            Box::new(join(*ka, *kb)?),
            Box::new(join(*va, *vb)?),
        )),
        (Ty::Dyn, _) | (_, Ty::Dyn) => Some(Ty::Dyn),
        _ => None,
    }
}

/// What the names of an expression are, while inferring.
#[derive(Debug, Default)]
pub struct Scope {
    /// Comprehension variables, innermost last, with their types where known.
    locals: Vec<(String, Option<Ty>)>,
    /// The type of `object` and `oldObject`, when known; `dyn` otherwise.
    object: Option<TypeRef<'static>>,
}

/// The CEL type of a value of a Kubernetes type, as graft's conversion from JSON makes
/// it: strings (times and base64 too) are strings, integers ints; a number, a quantity
/// and an int-or-string may be several types, so `dyn`.
pub fn of_kube(ty: TypeRef<'static>) -> Ty {
    match ty.shape() {
        Shape::Scalar(Scalar::String | Scalar::Byte | Scalar::DateTime) => Ty::String,
        Shape::Scalar(Scalar::Integer | Scalar::Int32) => Ty::Int,
        Shape::Scalar(Scalar::Boolean) => Ty::Bool,
        Shape::Scalar(_) => Ty::Dyn,
        Shape::Struct(_) => Ty::Kube(ty),
        Shape::List(list) => Ty::List(Box::new(of_kube(list.element()))),
        Shape::Map(map) => Ty::Map(Box::new(Ty::String), Box::new(of_kube(map.element()))),
    }
}

/// The type of field `name` of a value of type `ty`, when `ty` has fields.
fn field_of(ty: &Ty, name: &str) -> Option<Ty> {
    match ty {
        Ty::Dyn => Some(Ty::Dyn),
        Ty::Map(_, value) => Some(*value.clone()),
        Ty::Kube(kube) => match kube.shape() {
            Shape::Struct(fields) => match fields.field(name) {
                Some(field) => Some(of_kube(field)),
                None => fields.preserves_unknown().then_some(Ty::Dyn),
            },
            _ => Some(Ty::Dyn),
        },
        _ => None,
    }
}

impl Scope {
    /// A scope where `object` and `oldObject` are of the Kubernetes type `object`.
    pub fn with_object(object: TypeRef<'static>) -> Scope {
        Scope {
            locals: Vec::new(),
            object: Some(object),
        }
    }

    fn local(&self, name: &str) -> Option<&Option<Ty>> {
        self.locals
            .iter()
            .rev()
            .find(|(local, _)| local == name)
            .map(|(_, ty)| ty)
    }

    /// The type of `node`, or `None` when it is not evident.
    pub fn infer(&mut self, node: &IdedExpr) -> Option<Ty> {
        match &node.expr {
            Expr::Literal(literal) => Some(match literal {
                LiteralValue::Boolean(_) => Ty::Bool,
                LiteralValue::Bytes(_) => Ty::Bytes,
                LiteralValue::Double(_) => Ty::Double,
                LiteralValue::Int(_) => Ty::Int,
                LiteralValue::Null => Ty::Null,
                LiteralValue::String(_) => Ty::String,
                LiteralValue::UInt(_) => Ty::Uint,
            }),
            Expr::Ident(name) => match self.local(name) {
                Some(ty) => ty.clone(),
                None => match name.as_str() {
                    "object" | "oldObject" => Some(self.object.map_or(Ty::Dyn, of_kube)),
                    "params" => Some(Ty::Dyn),
                    _ => None,
                },
            },
            Expr::Select(select) => {
                if select.test {
                    return Some(Ty::Bool);
                }
                if let Some(ty) = request_field(node) {
                    return Some(ty);
                }
                match self.infer(&select.operand)? {
                    Ty::Dyn => Some(Ty::Dyn),
                    Ty::Map(_, value) => Some(*value),
                    kube @ Ty::Kube(_) => field_of(&kube, &select.field),
                    Ty::Struct(name) if name == super::structs::JSON_PATCH => {
                        Some(if select.field == "value" {
                            Ty::Dyn
                        } else {
                            Ty::String
                        })
                    }
                    Ty::Struct(_) => Some(Ty::Dyn),
                    _ => None,
                }
            }
            Expr::List(list) => {
                let mut element = Ty::Free;
                for (i, item) in list.elements.iter().enumerate() {
                    let mut ty = self.infer(item)?;
                    if list.optional_indices.contains(&i) {
                        ty = match ty {
                            Ty::Optional(inner) => *inner,
                            _ => return None,
                        };
                    }
                    element = join(element, ty)?;
                }
                Some(Ty::List(Box::new(element)))
            }
            Expr::Map(map) => {
                let (mut key, mut value) = (Ty::Free, Ty::Free);
                for entry in &map.entries {
                    let EntryExpr::MapEntry(entry) = &entry.expr else {
                        return None;
                    };
                    key = join(key, self.infer(&entry.key)?)?;
                    let mut ty = self.infer(&entry.value)?;
                    if entry.optional {
                        ty = match ty {
                            Ty::Optional(inner) => *inner,
                            _ => return None,
                        };
                    }
                    value = join(value, ty)?;
                }
                Some(Ty::Map(Box::new(key), Box::new(value)))
            }
            Expr::Struct(s) => {
                super::structs::patch_type(&s.type_name).map(|name| Ty::Struct(name.to_owned()))
            }
            Expr::Comprehension(c) => self.comprehension(c),
            Expr::Call(call) => {
                let args: Vec<&IdedExpr> = call.args.iter().collect();
                match &call.target {
                    Some(target) => self.method(&call.func_name, target, &args),
                    None => self.function(&call.func_name, &args),
                }
            }
            Expr::Unspecified => None,
        }
    }

    fn comprehension(&mut self, c: &ComprehensionExpr) -> Option<Ty> {
        let range = self.infer(&c.iter_range);
        let element = range.as_ref().and_then(Ty::element);
        let init = self.infer(&c.accu_init);
        let depth = self.locals.len();
        self.locals.push((c.iter_var.clone(), element));
        // A list built by appending (`map`, `filter`, `transformList`): its element is
        // the appended item's type.
        let accu = match (&init, appended_item(&c.loop_step, &c.accu_var)) {
            (Some(Ty::List(element)), Some(item)) if **element == Ty::Free => {
                self.locals.push((c.accu_var.clone(), init.clone()));
                let item = self.infer(item);
                self.locals.pop();
                item.map(|item| Ty::List(Box::new(item)))
            }
            _ => init,
        };
        self.locals.push((c.accu_var.clone(), accu));
        let result = self.infer(&c.result);
        self.locals.truncate(depth);
        result
    }

    fn function(&mut self, name: &str, args: &[&IdedExpr]) -> Option<Ty> {
        let first = |scope: &mut Scope| args.first().and_then(|arg| scope.infer(arg));
        Some(match name {
            operators::EQUALS
            | operators::NOT_EQUALS
            | operators::LESS
            | operators::LESS_EQUALS
            | operators::GREATER
            | operators::GREATER_EQUALS
            | operators::LOGICAL_AND
            | operators::LOGICAL_OR
            | operators::LOGICAL_NOT
            | operators::IN
            | operators::NOT_STRICTLY_FALSE
            | "matches"
            | "isQuantity"
            | "isSemver"
            | "isIP"
            | "isCIDR"
            | "isURL"
            | "sets.contains"
            | "sets.equivalent"
            | "sets.intersects"
            | super::structs::HAS => Ty::Bool,
            "size" | "sign" => Ty::Int,
            "int" => Ty::Int,
            "uint" => Ty::Uint,
            "double" => Ty::Double,
            "string" | "strings.quote" | "jsonpatch.escapeKey" => Ty::String,
            "bool" => Ty::Bool,
            "bytes" => Ty::Bytes,
            "duration" => Ty::Duration,
            "timestamp" => Ty::Timestamp,
            "type" => Ty::Type,
            "dyn" => Ty::Dyn,
            "lists.range" => Ty::List(Box::new(Ty::Int)),
            "optional.of" | "optional.ofNonZeroValue" => Ty::Optional(Box::new(first(self)?)),
            super::structs::STRUCT => {
                let Some(Expr::Literal(LiteralValue::String(name))) =
                    args.first().map(|arg| &arg.expr)
                else {
                    return None;
                };
                Ty::Struct(name.inner().to_owned())
            }
            "@graft_keys" => match first(self)? {
                Ty::List(_) => Ty::List(Box::new(Ty::Int)),
                Ty::Map(key, _) => Ty::List(key),
                _ => return None,
            },
            operators::CONDITIONAL => {
                let then = self.infer(args.get(1)?)?;
                let otherwise = self.infer(args.get(2)?)?;
                join(then, otherwise)?
            }
            operators::INDEX => match self.infer(args.first()?)? {
                Ty::List(element) => *element,
                Ty::Map(_, value) => *value,
                Ty::Dyn => Ty::Dyn,
                // Indexing an optional indexes its value, if any (`a.?b['c']`): cel-go's
                // `optional_type(map(K, V))[K]`, whose `V` an optional of `dyn` leaves
                // free (`orValue` then takes its default's type).
                Ty::Optional(inner) => Ty::Optional(Box::new(match *inner {
                    Ty::List(element) => *element,
                    Ty::Map(_, value) => *value,
                    Ty::Dyn | Ty::Free => Ty::Free,
                    Ty::Kube(kube) => field_of(&Ty::Kube(kube), literal_key(args.get(1)?)?)?,
                    _ => return None,
                })),
                kube @ Ty::Kube(_) => field_of(&kube, literal_key(args.get(1)?)?)?,
                _ => return None,
            },
            // `a.?b`: cel-go's `select_optional_field(dyn, string) -> optional_type(dyn)`.
            operators::OPT_SELECT => match self.infer(args.first()?)? {
                Ty::Dyn | Ty::Free => Ty::Optional(Box::new(Ty::Dyn)),
                Ty::Optional(inner) if matches!(*inner, Ty::Dyn | Ty::Free) => {
                    Ty::Optional(Box::new(Ty::Dyn))
                }
                Ty::Optional(inner) if self.object.is_some() => {
                    Ty::Optional(Box::new(self.member(&inner, args.get(1)?)?))
                }
                operand if self.object.is_some() => {
                    Ty::Optional(Box::new(self.member(&operand, args.get(1)?)?))
                }
                _ => return None,
            },
            // `a[?k]`: `map(K, V)[?K] -> optional_type(V)`, `V` free for a `dyn` operand.
            operators::OPT_INDEX => match self.infer(args.first()?)? {
                Ty::Dyn | Ty::Free => Ty::Optional(Box::new(Ty::Free)),
                Ty::Optional(inner) if matches!(*inner, Ty::Dyn | Ty::Free) => {
                    Ty::Optional(Box::new(Ty::Free))
                }
                Ty::List(element) => Ty::Optional(element),
                Ty::Map(_, value) => Ty::Optional(value),
                Ty::Optional(inner) if self.object.is_some() => {
                    Ty::Optional(Box::new(self.member(&inner, args.get(1)?)?))
                }
                operand if self.object.is_some() => {
                    Ty::Optional(Box::new(self.member(&operand, args.get(1)?)?))
                }
                _ => return None,
            },
            operators::ADD => {
                let (a, b) = (self.infer(args.first()?)?, self.infer(args.get(1)?)?);
                match (a, b) {
                    (Ty::String, _) | (_, Ty::String) => Ty::String,
                    (Ty::Dyn, other) | (other, Ty::Dyn) if is_number(&other) => other,
                    (a, b) => join(a, b)?,
                }
            }
            operators::SUBSTRACT | operators::MULTIPLY | operators::DIVIDE | operators::MODULO => {
                let (a, b) = (self.infer(args.first()?)?, self.infer(args.get(1)?)?);
                match (a, b) {
                    (a, b) if a == b && is_number(&a) => a,
                    (Ty::Dyn, other) | (other, Ty::Dyn) if is_number(&other) => other,
                    _ => return None,
                }
            }
            operators::NEGATE => first(self).filter(is_number)?,
            _ => return None,
        })
    }

    fn method(&mut self, name: &str, target: &IdedExpr, args: &[&IdedExpr]) -> Option<Ty> {
        Some(match name {
            "contains" | "startsWith" | "endsWith" | "matches" | "isSorted" | "hasValue"
            | "isGreaterThan" | "isLessThan" | "isInteger" => Ty::Bool,
            "lowerAscii" | "upperAscii" | "trim" | "replace" | "substring" | "charAt" | "join"
            | "format" | "find" => Ty::String,
            "split" | "findAll" => Ty::List(Box::new(Ty::String)),
            "size" | "indexOf" | "lastIndexOf" | "compareTo" | "major" | "minor" | "patch" => {
                Ty::Int
            }
            // The value or the default, as cel-go's `optional_type(T).orValue(T)` unifies
            // them: `optional_type(dyn).orValue(false)` is `dyn`, an optional whose `T`
            // is still free takes the default's type.
            "orValue" => {
                let default = args.first().and_then(|arg| self.infer(arg))?;
                match self.infer(target)? {
                    Ty::Optional(inner) if *inner == Ty::Free => default,
                    Ty::Optional(inner) => join(*inner, default)?,
                    _ => return None,
                }
            }
            "value" => match self.infer(target)? {
                Ty::Optional(inner) => *inner,
                _ => return None,
            },
            "first" | "last" => Ty::Optional(Box::new(self.infer(target)?.element()?)),
            "sort" | "distinct" | "reverse" | "slice" => match self.infer(target)? {
                list @ Ty::List(_) => list,
                _ => return None,
            },
            "min" | "max" | "sum" => self.infer(target)?.element()?,
            _ => {
                // `optional.of(x)` and the like: a namespaced function written as a method.
                let qualified = qualified_name(target)?;
                return self.function(&format!("{qualified}.{name}"), args);
            }
        })
    }
}

impl Scope {
    /// The type of `operand.?key` or `operand[?key]`'s value: a field, a map's value, a
    /// list's item.
    fn member(&mut self, operand: &Ty, key: &IdedExpr) -> Option<Ty> {
        match operand {
            Ty::List(element) => Some(*element.clone()),
            other => field_of(other, literal_key(key)?),
        }
    }
}

/// A string literal key (`'labels'`, or the field of `a.?labels`, which the parser
/// passes as a string literal).
fn literal_key(node: &IdedExpr) -> Option<&str> {
    match &node.expr {
        Expr::Literal(LiteralValue::String(key)) => Some(key.inner()),
        _ => None,
    }
}

fn is_number(ty: &Ty) -> bool {
    matches!(ty, Ty::Int | Ty::Uint | Ty::Double)
}

/// `a.b.c` of a chain of plain field selections on an identifier.
fn qualified_name(node: &IdedExpr) -> Option<String> {
    match &node.expr {
        Expr::Ident(name) => Some(name.clone()),
        Expr::Select(select) if !select.test => Some(format!(
            "{}.{}",
            qualified_name(&select.operand)?,
            select.field
        )),
        _ => None,
    }
}

/// The item of a step `accu + [item]`, or of `guard ? accu + [item] : accu`.
fn appended_item<'e>(step: &'e IdedExpr, accu: &str) -> Option<&'e IdedExpr> {
    let Expr::Call(call) = &step.expr else {
        return None;
    };
    match (call.func_name.as_str(), call.args.as_slice()) {
        (operators::ADD, [lhs, rhs]) if matches!(&lhs.expr, Expr::Ident(n) if n == accu) => {
            match &rhs.expr {
                Expr::List(list) if list.elements.len() == 1 => list.elements.first(),
                _ => None,
            }
        }
        (operators::CONDITIONAL, [_, then, otherwise]) if matches!(&otherwise.expr, Expr::Ident(n) if n == accu) => {
            appended_item(then, accu)
        }
        _ => None,
    }
}

/// The type of a plain field of `request` (`request.name`, `request.userInfo.groups`).
fn request_field(node: &IdedExpr) -> Option<Ty> {
    let path = qualified_name(node)?;
    Some(match path.strip_prefix("request.")? {
        "name" | "namespace" | "operation" | "subResource" | "requestSubResource" => Ty::String,
        "dryRun" => Ty::Bool,
        "options" => Ty::Dyn,
        "userInfo.username" | "userInfo.uid" => Ty::String,
        "userInfo.groups" => Ty::List(Box::new(Ty::String)),
        field
            if ["kind.", "requestKind.", "resource.", "requestResource."]
                .iter()
                .any(|prefix| field.starts_with(prefix)) =>
        {
            Ty::String
        }
        _ => return None,
    })
}
