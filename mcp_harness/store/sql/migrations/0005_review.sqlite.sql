-- 5: review gates: tasks.review, tasks.kind (work or gate), tasks.review_comment
ALTER TABLE tasks ADD COLUMN review BOOLEAN DEFAULT FALSE NOT NULL
/
ALTER TABLE tasks ADD COLUMN kind VARCHAR DEFAULT 'work' NOT NULL
/
ALTER TABLE tasks ADD COLUMN review_comment TEXT
/
