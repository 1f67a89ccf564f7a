// The parsed form of a template: expressions and statements, each with its source line.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "jinja/value.h"

namespace flotilla::inference::jinja {

struct Expr {
  enum class Kind {
    kLiteral,    // value
    kName,       // name
    kList,       // items
    kTuple,      // items
    kDict,       // items: key, value, key, value...
    kGetattr,    // items[0] . name
    kGetitem,    // items[0] [ items[1] ]
    kSlice,      // items[0] [ items[1] : items[2] : items[3] ] (null parts absent)
    kCall,       // items[0] ( items[1..], kwargs )
    kFilter,     // items[0] | name ( items[1..], kwargs )
    kTest,       // items[0] is [not] name ( items[1..], kwargs )
    kNeg,        // - items[0]
    kPos,        // + items[0]
    kNot,        // not items[0]
    kBinary,     // items[0] op items[1]
    kAnd,        // items[0] and items[1]
    kOr,         // items[0] or items[1]
    kCondition,  // items[0] if items[1] else items[2] (null: undefined)
  };
  Kind kind = Kind::kLiteral;
  int line = 0;
  Value value;
  std::string name;  // name, attribute, filter, test or operator
  bool negated = false;
  std::vector<std::unique_ptr<Expr>> items;
  std::vector<std::pair<std::string, std::unique_ptr<Expr>>> kwargs;
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

// What a set or for statement assigns to: a name, a namespace attribute, or a tuple of names.
struct Target {
  std::vector<std::string> names;  // more than one: unpacking
  std::string attribute;           // set ns.attribute = ...
  bool tuple = false;
};

struct MacroParam {
  std::string name;
  std::unique_ptr<Expr> default_value;  // null: no default
};

struct Stmt {
  enum class Kind {
    kText,      // text
    kOutput,    // {{ expr }}
    kIf,        // conditions[i] -> bodies[i]; else_body
    kFor,       // for target in expr [if condition]: bodies[0]; else_body
    kSet,       // set target = expr
    kSetBlock,  // set target: bodies[0], filtered through filters (as kFilter chain on a null operand)
    kMacro,     // macro name(params): bodies[0]
    kCallBlock, // call[(params)] expr: bodies[0] becomes caller()
    kFilterBlock,  // filter chain: bodies[0]
    kBreak,
    kContinue,
    kScope,     // a block with no meaning of its own ({% generation %}): bodies[0]
  };
  Kind kind = Kind::kText;
  int line = 0;
  std::string text;
  std::unique_ptr<Expr> expr;
  std::unique_ptr<Expr> condition;  // for's filter
  std::vector<std::unique_ptr<Expr>> conditions;
  std::vector<Body> bodies;
  Body else_body;
  Target target;
  std::string name;
  std::vector<MacroParam> params;
};

}  // namespace flotilla::inference::jinja
