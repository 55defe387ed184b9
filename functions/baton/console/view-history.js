// Placeholder while the view is built.
import {h, replace} from './dom.js';

export async function render(root) {
  replace(root, h('h1', {}, 'history'));
}
