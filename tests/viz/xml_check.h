// SPDX-License-Identifier: Apache-2.0
// A small XML well-formedness checker for the SVG tests: one root element, balanced and properly
// nested tags, quoted and unique attributes, only the five predefined entities or character
// references, no '<' in attribute values, comments and an optional <?xml ...?> prolog. Not a
// validating parser; enough to catch what a hand-written SVG writer can get wrong.
#pragma once

#include <cctype>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace fsdp::testing {

namespace xml_internal {

inline bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' || c == ':' ||
         c == '.';
}

// Checks the character data s (text or attribute value) for valid entity references.
inline std::string check_entities(std::string_view s) {
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      continue;
    }
    const std::size_t semi = s.find(';', i);
    if (semi == std::string_view::npos) {
      return "unterminated entity";
    }
    const std::string_view name = s.substr(i + 1, semi - i - 1);
    static const std::set<std::string_view> kNamed = {"amp", "lt", "gt", "quot", "apos"};
    const bool numeric = name.size() > 1 && name[0] == '#';
    if (!numeric && kNamed.count(name) == 0) {
      return "unknown entity &" + std::string(name) + ";";
    }
    i = semi;
  }
  return "";
}

}  // namespace xml_internal

// Returns "" for a well-formed document, else what is wrong and where.
inline std::string check_xml(std::string_view doc) {
  using xml_internal::check_entities;
  using xml_internal::is_name_char;
  std::vector<std::string> stack;
  int roots = 0;
  std::size_t i = 0;
  auto at = [&](std::size_t pos) { return " at offset " + std::to_string(pos); };
  if (doc.substr(0, 5) == "<?xml") {
    const std::size_t end = doc.find("?>");
    if (end == std::string_view::npos) {
      return "unterminated prolog";
    }
    i = end + 2;
  }
  while (i < doc.size()) {
    const std::size_t lt = doc.find('<', i);
    const std::string_view text = doc.substr(i, lt == std::string_view::npos ? doc.size() - i : lt - i);
    if (const std::string e = check_entities(text); !e.empty()) {
      return e + at(i);
    }
    if (text.find('>') != std::string_view::npos && stack.empty()) {
      return "stray '>'" + at(i);
    }
    if (stack.empty() && text.find_first_not_of(" \t\r\n") != std::string_view::npos) {
      return "text outside the root element" + at(i);
    }
    if (lt == std::string_view::npos) {
      break;
    }
    i = lt + 1;
    if (doc.substr(i, 3) == "!--") {
      const std::size_t end = doc.find("-->", i);
      if (end == std::string_view::npos) {
        return "unterminated comment" + at(lt);
      }
      i = end + 3;
      continue;
    }
    const bool closing = i < doc.size() && doc[i] == '/';
    if (closing) {
      ++i;
    }
    const std::size_t name_begin = i;
    while (i < doc.size() && is_name_char(doc[i])) {
      ++i;
    }
    const std::string name(doc.substr(name_begin, i - name_begin));
    if (name.empty()) {
      return "tag without a name" + at(lt);
    }
    if (closing) {
      while (i < doc.size() && std::isspace(static_cast<unsigned char>(doc[i])) != 0) {
        ++i;
      }
      if (i >= doc.size() || doc[i] != '>') {
        return "malformed closing tag </" + name + at(lt);
      }
      if (stack.empty() || stack.back() != name) {
        return "closing </" + name + "> does not match <" +
               (stack.empty() ? std::string("nothing") : stack.back()) + ">" + at(lt);
      }
      stack.pop_back();
      ++i;
      continue;
    }
    std::set<std::string> attributes;
    bool self_closing = false;
    while (true) {
      const std::size_t before = i;
      while (i < doc.size() && std::isspace(static_cast<unsigned char>(doc[i])) != 0) {
        ++i;
      }
      if (i >= doc.size()) {
        return "unterminated tag <" + name + at(lt);
      }
      if (doc[i] == '>') {
        ++i;
        break;
      }
      if (doc.substr(i, 2) == "/>") {
        self_closing = true;
        i += 2;
        break;
      }
      if (i == before) {
        return "attributes of <" + name + "> need white space before them" + at(i);
      }
      const std::size_t attr_begin = i;
      while (i < doc.size() && is_name_char(doc[i])) {
        ++i;
      }
      const std::string attr(doc.substr(attr_begin, i - attr_begin));
      if (attr.empty() || i + 1 >= doc.size() || doc[i] != '=' ||
          (doc[i + 1] != '"' && doc[i + 1] != '\'')) {
        return "malformed attribute in <" + name + ">" + at(attr_begin);
      }
      if (!attributes.insert(attr).second) {
        return "attribute '" + attr + "' repeated in <" + name + ">" + at(attr_begin);
      }
      const char quote = doc[i + 1];
      const std::size_t value_begin = i + 2;
      const std::size_t value_end = doc.find(quote, value_begin);
      if (value_end == std::string_view::npos) {
        return "unterminated attribute value" + at(attr_begin);
      }
      const std::string_view value = doc.substr(value_begin, value_end - value_begin);
      if (value.find('<') != std::string_view::npos) {
        return "'<' in attribute value" + at(value_begin);
      }
      if (const std::string e = check_entities(value); !e.empty()) {
        return e + at(value_begin);
      }
      i = value_end + 1;
    }
    if (stack.empty()) {
      if (++roots > 1) {
        return "more than one root element" + at(lt);
      }
    }
    if (!self_closing) {
      stack.push_back(name);
    }
  }
  if (!stack.empty()) {
    return "unclosed <" + stack.back() + ">";
  }
  if (roots != 1) {
    return "no root element";
  }
  return "";
}

// Occurrences of `needle` in `haystack` (non-overlapping).
inline std::size_t count_occurrences(std::string_view haystack, std::string_view needle) {
  std::size_t n = 0;
  for (std::size_t pos = haystack.find(needle); pos != std::string_view::npos;
       pos = haystack.find(needle, pos + needle.size())) {
    ++n;
  }
  return n;
}

}  // namespace fsdp::testing
