GREETING = ", hello"
