// The Jinja interpreter on its own: exact renderings of each feature, and errors that name the
// template line. (jinja_oracle_test.cc compares a larger corpus with Python's jinja2.)
#include <chrono>
#include <string>
#include <vector>

#include "flotilla/inference/jinja.h"
#include "gtest/gtest.h"

namespace flotilla::inference::jinja {
namespace {

std::string Render(const std::string& source, const nlohmann::ordered_json& context = nlohmann::ordered_json::object()) {
  absl::StatusOr<Template> t = Template::Parse(source, "t");
  if (!t.ok()) return "PARSE ERROR: " + std::string(t.status().message());
  absl::StatusOr<std::string> out = t->Render(context);
  if (!out.ok()) return "RENDER ERROR: " + std::string(out.status().message());
  return *out;
}

struct Case {
  const char* source;
  const char* context;
  const char* expected;
};

class JinjaRenderTest : public ::testing::TestWithParam<Case> {};

TEST_P(JinjaRenderTest, RendersExactly) {
  const Case& c = GetParam();
  EXPECT_EQ(Render(c.source, nlohmann::ordered_json::parse(c.context)), c.expected) << c.source;
}

INSTANTIATE_TEST_SUITE_P(
    Features, JinjaRenderTest,
    ::testing::Values(
        Case{"{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}",
             R"({"xs": ["a", "b"]})", "102TrueFalse2;211FalseTrue2;"},
        Case{"{% for x in xs %}{{ x }}{% else %}empty{% endfor %}", R"({"xs": []})", "empty"},
        Case{"{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}", R"({"d": {"z": 1, "a": 2}})", "z=1,a=2,"},
        Case{"{% for x in range(10) if x is odd %}{% if x > 6 %}{% break %}{% endif %}{{ x }}{% endfor %}", "{}", "135"},
        Case{"{% for x in range(4) %}{% if x == 1 %}{% continue %}{% endif %}{{ x }}{% endfor %}", "{}", "023"},
        Case{"{% if a %}A{% elif b %}B{% else %}C{% endif %}", R"({"a": 0, "b": ""})", "C"},
        Case{"{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}", "{}", "3"},
        Case{"{% set c = 0 %}{% for i in range(3) %}{% set c = c + 1 %}{{ c }}{% endfor %}{{ c }}", "{}", "1110"},
        Case{"{% set x %}a{{ 1 + 1 }}b{% endset %}[{{ x }}]", "{}", "[a2b]"},
        Case{"{% macro f(a, b='B') %}<{{ a }}{{ b }}>{% endmacro %}{{ f(1) }}{{ f(2, b=3) }}", "{}", "<1B><23>"},
        Case{"{% macro w() %}[{{ caller() }}]{% endmacro %}{% call w() %}in{% endcall %}", "{}", "[in]"},
        Case{"{{ d | tojson }}", R"({"d": {"b": "é\n", "a": [1, 2.5, null, true]}})", R"({"b": "é\n", "a": [1, 2.5, null, true]})"},
        Case{"{{ d | tojson(indent=2) }}", R"({"d": {"a": [1], "b": {}}})", "{\n  \"a\": [\n    1\n  ],\n  \"b\": {}\n}"},
        Case{"{{ '  x  ' | trim }}|{{ 'xxaxx' | trim('x') }}|{{ [1,2] | length }}|{{ 'héllo' | count }}", "{}", "x|a|2|5"},
        Case{"{{ 'hello world' | title }} {{ 'hELLO' | capitalize }} {{ 'Ab' | lower }}{{ 'Ab' | upper }}", "{}", "Hello World Hello abAB"},
        Case{"{{ 'a-b-c' | replace('-', '+') }} {{ [1, 2] | join(', ') }} {{ [3, 4] | first }}{{ [3, 4] | last }}", "{}", "a+b+c 1, 2 34"},
        Case{"{{ x | default('d') }}{{ none | default('n') }}{{ '' | d('e', true) }}", "{}", "dNonee"},
        Case{"{{ xs | map(attribute='n') | list }} {{ xs | selectattr('n', 'gt', 1) | map(attribute='n') | join }}",
             R"({"xs": [{"n": 1}, {"n": 2}, {"n": 3}]})", "[1, 2, 3] 23"},
        Case{"{{ xs | rejectattr('ok') | list | length }} {{ [1, 2, 3, 4] | select('even') | list }} {{ [1, 2] | reject('odd') | list }}",
             R"({"xs": [{"ok": true}, {"ok": false}, {}]})", "2 [2, 4] [2]"},
        Case{"{{ '42' | int + 1 }} {{ 'x' | int }} {{ '2.5' | float }} {{ -3 | abs }} {{ 2.5 | round }} {{ 3.14159 | round(2) }}", "{}",
             "43 0 2.5 3 2.0 3.14"},
        Case{"{{ 'a\nb' | indent(2) }}|{{ [3, 1, 3, 2] | unique | list }}|{{ ['b', 'A', 'c'] | sort | list }}", "{}",
             "a\n  b|[3, 1, 2]|['A', 'b', 'c']"},
        Case{"{{ {'b': 1, 'a': 2} | dictsort }} {{ [1, 2, 3] | reverse | list }} {{ 'one two, three' | wordcount }}", "{}",
             "[('a', 2), ('b', 1)] [3, 2, 1] 3"},
        Case{"{{ d | items | list }} {{ 5 | string }}{{ [1] | safe }}", R"({"d": {"k": "v"}})", "[('k', 'v')] 5[1]"},
        Case{"{{ x is defined }}{{ y is undefined }}{{ n is none }}{{ 's' is string }}{{ 1.5 is number }}{{ d is mapping }}",
             R"({"x": 1, "n": null, "d": {}})", "TrueTrueTrueTrueTrueTrue"},
        Case{"{{ [1] is iterable }}{{ 'ab' is sequence }}{{ 3 is equalto 3 }}{{ 3 == 3.0 }}{{ 2 is in [1, 2] }}{{ x is not none }}",
             R"({"x": 0})", "TrueTrueTrueTrueTrueTrue"},
        Case{"{{ 'abcdef'[1:4] }}{{ 'abcdef'[::-2] }}{{ xs[-1] }}{{ xs[:-1] }}{{ 'héllo'[1] }}", R"({"xs": [1, 2, 3]})", "bcdfdb3[1, 2]é"},
        Case{"{{ ' a b '.strip() }}|{{ 'xxhixx'.lstrip('x') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}", "{}",
             "a b|hixx|['a', 'b', '', 'c']|['a', 'b']"},
        Case{"{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}{{ 'Ab'.upper() }}{{ 'aXa'.replace('a', 'b') }}{{ 'abc'.find('c') }}",
             "{}", "TrueTrueABbXb2"},
        Case{"{{ d.get('a') }}{{ d.get('z', 'Z') }}{{ d.get('q') }}{{ d.keys() | list }}{{ d.values() | list }}", R"({"d": {"a": 1}})",
             "1ZNone['a'][1]"},
        Case{"{{ 1 if x is not defined else 2 }}{{ 'a' ~ 1 ~ none }}{{ 'n' not in 'abc' }}{{ '%s-%d' % ('a', 3) }}", "{}", "1a1NoneTruea-3"},
        Case{"{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 10 / 4 }} {{ 2 ** 10 }} {{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1e-5 }}", "{}",
             "3 -4 2 2.5 1024 0.30000000000000004 1e+20 1e-05"},
        Case{"{{ [1, 'a', none, true, {'k': \"it's\"}] }}", "{}", "[1, 'a', None, True, {'k': \"it's\"}]"},
        Case{"  {% if true %}\n    x\n  {% endif %}\n", "{}", "    x\n"},
        Case{"a  {%- if true -%}  b  {%- endif -%}  c", "{}", "abc"},
        Case{"{# comment #}\nx {{- ' y ' -}} z\n", "{}", "x y z"},
        Case{"{% raw %}{{ not evaluated }}{% endraw %}", "{}", "{{ not evaluated }}"},
        Case{"{% filter upper %}abc{% endfilter %}", "{}", "ABC"},
        Case{"{% generation %}g{% endgeneration %}", "{}", "g"},
        // An empty sequence repeated four billion times is empty at once.
        Case{"{{ ('' * 4000000000) | length }}{{ ([] * 4000000000) | length }}{{ 'ab' * 2 }}", "{}", "00abab"}));

TEST(JinjaErrorTest, RaiseExceptionNamesTheLine) {
  absl::StatusOr<Template> t = Template::Parse("line1\n{% if x %}\n{{ raise_exception('bad role') }}\n{% endif %}", "tpl");
  ASSERT_TRUE(t.ok()) << t.status();
  absl::StatusOr<std::string> out = t->Render({{"x", true}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message(), "tpl:3: raise_exception: bad role");
}

TEST(JinjaErrorTest, SyntaxErrorNamesTheLine) {
  absl::StatusOr<Template> t = Template::Parse("a\nb\n{% for x in %}{% endfor %}", "tpl");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t.status().message(), "tpl:3: unexpected end of statement block");
}

TEST(JinjaErrorTest, UnclosedBlockNamesWhatItWants) {
  absl::StatusOr<Template> t = Template::Parse("{% if x %}\nopen", "tpl");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), "tpl:2: unexpected end of template; the block opened at line 1 wants 'endif'");
}

TEST(JinjaErrorTest, UndefinedAttributeAndTypeErrorsNameTheLine) {
  absl::StatusOr<Template> t = Template::Parse("\n\n{{ m.content.x }}", "tpl");
  ASSERT_TRUE(t.ok());
  absl::StatusOr<std::string> out = t->Render({{"m", nlohmann::ordered_json::object()}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(), "tpl:3: 'dict object' has no attribute 'content'");
  t = Template::Parse("{{ 'a' +\n b }}", "tpl");
  ASSERT_TRUE(t.ok());
  out = t->Render({{"b", nlohmann::ordered_json::object()}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(), "tpl:1: can only concatenate str (not \"dict\") to str");
}

// Templates that once crashed or ran away (found with tests/fuzz/jinja_template_fuzz.cc and
// kept in its corpus): each ends in an InvalidArgument naming the line, within the bounds of
// jinja/limits.h, instead of a stack overflow, undefined integer overflow, a render that does
// not end or memory exhausted.
TEST(JinjaErrorTest, HostileTemplatesFailWithinTheBounds) {
  const std::string too_big = "larger than the render allows (16777216 bytes, 1048576 items)";
  struct Hostile {
    std::string source, expected;
  };
  const std::vector<Hostile> cases = {
      {"{{ " + std::string(20000, '(') + "1" + std::string(20000, ')') + " }}",
       "PARSE ERROR: t:1: nested deeper than 128 levels"},
      {"{{ " + std::string(20000, '[') + std::string(20000, ']') + " }}", "PARSE ERROR: t:1: nested deeper than 128 levels"},
      {[] {
         std::string s;
         for (int i = 0; i < 5000; ++i) s += "{% if 1 %}";
         s += "x";
         for (int i = 0; i < 5000; ++i) s += "{% endif %}";
         return s;
       }(),
       "PARSE ERROR: t:1: nested deeper than 128 levels"},
      {"{{ not " + [] {
         std::string s;
         for (int i = 0; i < 5000; ++i) s += "not ";
         return s;
       }() + "1 }}",
       "PARSE ERROR: t:1: nested deeper than 128 levels"},
      {"{{ x" + [] {
         std::string s;
         for (int i = 0; i < 1000; ++i) s += ".a";
         return s;
       }() + " }}",
       "PARSE ERROR: t:1: expression nested deeper than 128 levels"},
      {"{{ 1" + [] {
         std::string s;
         for (int i = 0; i < 1000; ++i) s += " + 1";
         return s;
       }() + " }}",
       "PARSE ERROR: t:1: expression nested deeper than 128 levels"},
      {"{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "RENDER ERROR: t:1: recursion deeper than 256 levels"},
      {"{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}",
       "RENDER ERROR: t:1: more than 50000 loop iterations"},
      {"{{ 'x' * 2000000000 }}", "RENDER ERROR: t:1: repeated string " + too_big},
      {"{{ [1, 2] * 4000000000 }}", "RENDER ERROR: t:1: repeated list " + too_big},
      {"{% set ns = namespace(x='ab') %}{% for i in range(60) %}{% set ns.x = ns.x ~ ns.x %}{% endfor %}",
       "RENDER ERROR: t:1: concatenated string " + too_big},
      {"{{ 9223372036854775807 + 1 }}", "RENDER ERROR: t:1: integer overflow in '+'"},
      {"{{ -9223372036854775807 - 2 }}", "RENDER ERROR: t:1: integer overflow in '-'"},
      {"{{ 4294967296 * 4294967296 }}", "RENDER ERROR: t:1: integer overflow in '*'"},
      {"{{ (-9223372036854775807 - 1) // -1 }}", "RENDER ERROR: t:1: integer overflow in '//'"},
      {"{{ -(-9223372036854775807 - 1) }}", "RENDER ERROR: t:1: integer overflow in unary '-'"},
      {"{{ 2 ** 64 }}", "RENDER ERROR: t:1: integer overflow in '**'"},
      {"{{ 1 ** 99999999999999 }} {{ (-1) ** 99999999999999 }} {{ 0 ** 99999999999999 }}", "1 -1 0"},
      {"{{ range(9223372036854775800, 9223372036854775807, 5) | list }}",
       "[9223372036854775800, 9223372036854775805]"},
  };
  for (const Hostile& c : cases) {
    EXPECT_EQ(Render(c.source), c.expected) << c.source.substr(0, 120);
  }
}

TEST(JinjaTest, StrftimeNowFormatsTheGivenTime) {
  absl::StatusOr<Template> t = Template::Parse("{{ strftime_now('%Y') }}", "tpl");
  ASSERT_TRUE(t.ok());
  RenderOptions options;
  // 2001-09-09T01:46:40Z: the year is 2001 in every time zone.
  options.now = std::chrono::system_clock::from_time_t(1000000000);
  absl::StatusOr<std::string> out = t->Render(nlohmann::ordered_json::object(), options);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, "2001");
}

}  // namespace
}  // namespace flotilla::inference::jinja
