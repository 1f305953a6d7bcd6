# cmake -DCOMMAND="a|b|c" -DEXPECT_EXIT=1 [-DEXPECT_REGEX=re] [-DREJECT_REGEX=re] -P expect_run.cmake
# Runs COMMAND and fails unless it exits with EXPECT_EXIT and its output matches EXPECT_REGEX (and
# not REJECT_REGEX): a test that a run fails for the reason it should, not for any reason.
string(REPLACE "|" ";" COMMAND "${COMMAND}")  # "|": a ";" list would be split by add_test
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc STREQUAL "${EXPECT_EXIT}")
  message(FATAL_ERROR "exit status ${rc}, expected ${EXPECT_EXIT}")
endif()
if(DEFINED EXPECT_REGEX AND NOT "${out}${err}" MATCHES "${EXPECT_REGEX}")
  message(FATAL_ERROR "the output does not match '${EXPECT_REGEX}'")
endif()
if(DEFINED REJECT_REGEX AND "${out}${err}" MATCHES "${REJECT_REGEX}")
  message(FATAL_ERROR "the output matches '${REJECT_REGEX}'")
endif()
