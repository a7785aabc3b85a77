"""Running a verification: session hooks, executor, scheduler, budget, journal, output."""
