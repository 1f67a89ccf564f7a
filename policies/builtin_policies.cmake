# flotilla_builtin_policies(OUT_VAR): writes builtin_policies.cc (the shipped policies/*.yaml
# compiled in, so a policy name works from any binary) into the current binary dir and sets
# OUT_VAR to its path. Used by the policies library and by the fuzz build (tests/fuzz).
function(flotilla_builtin_policies out_var)
  set(dir ${PROJECT_SOURCE_DIR}/policies)
  set(builtin_cc ${CMAKE_CURRENT_BINARY_DIR}/builtin_policies.cc)
  set(builtin_body "")
  set(builtin_names "")
  foreach(policy_name default no-network build)
    set(yaml_file ${dir}/${policy_name}.yaml)
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${yaml_file})
    file(READ ${yaml_file} yaml_text)
    string(APPEND builtin_body "  if (name == \"${policy_name}\") return R\"FLOTILLA_POLICY(${yaml_text})FLOTILLA_POLICY\";\n")
    string(APPEND builtin_names "\"${policy_name}\", ")
  endforeach()
  file(CONFIGURE OUTPUT ${builtin_cc} CONTENT
"// Generated from policies/*.yaml by policies/builtin_policies.cmake.
#include \"policy_internal.h\"

namespace flotilla::policies {

const char* BuiltinPolicyText(std::string_view name) {
${builtin_body}  return nullptr;
}

std::vector<std::string> BuiltinPolicyNames() { return {${builtin_names}}; }

}  // namespace flotilla::policies
" @ONLY)
  set(${out_var} ${builtin_cc} PARENT_SCOPE)
endfunction()
