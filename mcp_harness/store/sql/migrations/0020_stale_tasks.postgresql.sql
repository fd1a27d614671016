-- 20: tasks.stale: a done task one of whose dependencies was reopened and is not done again
-- Its dependents wait on it as on an unfinished task; done tasks stay done. False for every task here
-- (a database that had such a task keeps its dependents' flags until their dependencies change).
ALTER TABLE tasks ADD COLUMN stale BOOLEAN DEFAULT FALSE NOT NULL
/
