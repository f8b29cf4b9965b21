package dedupe_test

const helperEnv = "HIGHWATER_DEDUPE_HELPER"

func helperMain() int { return 0 }
